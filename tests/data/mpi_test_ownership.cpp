// Distributed ownership (issue 25), at 1-4 ranks: after build_problem each rank's training table
// holds the values of exactly the rows of the clients it hosts (their training and local test
// rows), its test table those of the test rows it evaluates, each equal bitwise to the row of the
// whole table as load_data reads it; no row is held twice, none is left out; a row of another
// rank's client is refused; and the standardization reduced over the ranks equals, bit for bit,
// the one computed from the whole table on one rank. HDF5 files are read with both
// data.hdf5_driver values: "posix" (independent reads) and "mpio" (collective MPI-IO reads, checked
// against load_data's POSIX read of the whole file), also with rows scattered over the file (an
// iid partition: thousands of runs of rows per rank, so several collective rounds, a different
// number on each rank) and uint8 and float64 features.
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/data/source.hpp"
#include "fluence/fl/problem.hpp"

namespace fluence {
namespace {

const char* kSyntheticDeck = R"(
seed = 9
[data.synthetic]
rows = 1500
numeric = 3
categorical = [3, 2]
classes = 3
[partition]
clients = 7
scheme = "dirichlet"
local_test_fraction = 0.2
)";

// An HDF5 file of 600 rows x 4 float32 columns (values that are not multiples of a power of two,
// so the standardization's rounding shows), labels 0-2 and 12 contiguous client-id blocks of 50
// rows, with a separate 200-row test split; written by rank 0 with the HDF5 C API.
std::string write_hdf5(const std::string& path) {
  if (world_rank() == 0) {
    const hsize_t rows = 600, test_rows = 200, width = 4;
    std::vector<float> x(rows * width), tx(test_rows * width);
    std::vector<std::int64_t> y(rows), ty(test_rows), client(rows);
    for (hsize_t r = 0; r < rows; ++r) {
      for (hsize_t j = 0; j < width; ++j) x[r * width + j] = std::sin(0.37f * (r * width + j)) * 3;
      y[r] = static_cast<std::int64_t>((r * 7 + r / 13) % 3);
      client[r] = static_cast<std::int64_t>(r / 50);
    }
    for (hsize_t r = 0; r < test_rows; ++r) {
      for (hsize_t j = 0; j < width; ++j) tx[r * width + j] = std::cos(0.11f * (r * width + j));
      ty[r] = static_cast<std::int64_t>(r % 3);
    }
    const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const auto put = [&](const char* name, hid_t type, std::vector<hsize_t> dims,
                         const void* data) {
      const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
      const hid_t set = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
      H5Dclose(set);
      H5Sclose(space);
    };
    put("x", H5T_NATIVE_FLOAT, {rows, width}, x.data());
    put("y", H5T_NATIVE_INT64, {rows}, y.data());
    put("client", H5T_NATIVE_INT64, {rows}, client.data());
    put("test_x", H5T_NATIVE_FLOAT, {test_rows, width}, tx.data());
    put("test_y", H5T_NATIVE_INT64, {test_rows}, ty.data());
    H5Fclose(file);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

std::string hdf5_deck(const std::string& path, const std::string& driver) {
  return fmt::format(R"(
seed = 4
[data]
source = "hdf5"
path = "{}"
hdf5_driver = "{}"
[data.arrays]
clients = "client"
test_features = "test_x"
test_labels = "test_y"
[partition]
scheme = "natural"
local_test_fraction = 0.1
)",
                     path, driver);
}

// 40,000 rows x 3 columns as float64 ("x") and as uint8 ("xb"), labels 0-1, no test split: an
// iid partition over 5 clients then gives each rank thousands of runs of consecutive rows, more
// than one collective round's 4,096 (src/data/hdf5_source.cpp).
std::string write_scattered_hdf5(const std::string& path) {
  if (world_rank() == 0) {
    const hsize_t rows = 40000, width = 3;
    std::vector<double> x(rows * width);
    std::vector<unsigned char> xb(rows * width);
    std::vector<std::int64_t> y(rows);
    for (hsize_t i = 0; i < rows * width; ++i) {
      x[i] = std::sin(0.731 * static_cast<double>(i)) * 5;
      xb[i] = static_cast<unsigned char>((i * 37 + i / 7) % 256);
    }
    for (hsize_t r = 0; r < rows; ++r) y[r] = static_cast<std::int64_t>((r * 5 + r / 11) % 2);
    const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const auto put = [&](const char* name, hid_t type, std::vector<hsize_t> dims,
                         const void* data) {
      const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
      const hid_t set = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
      H5Dclose(set);
      H5Sclose(space);
    };
    put("x", H5T_NATIVE_DOUBLE, {rows, width}, x.data());
    put("xb", H5T_NATIVE_UCHAR, {rows, width}, xb.data());
    put("y", H5T_NATIVE_INT64, {rows}, y.data());
    H5Fclose(file);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

std::string scattered_deck(const std::string& path, const std::string& features,
                           const std::string& driver) {
  return fmt::format(R"(
seed = 6
[data]
source = "hdf5"
path = "{}"
hdf5_driver = "{}"
test_fraction = 0.1
[data.arrays]
features = "{}"
[partition]
scheme = "iid"
clients = 5
)",
                     path, driver, features);
}

std::string temporary_h5(const char* stem) {
  return std::filesystem::temp_directory_path() /
         fmt::format("fluence_{}_{}.h5", stem, broadcast_string(std::to_string(::getpid())));
}

// This rank's clients' rows (training and local test), ascending: what it must hold.
std::vector<std::int64_t> hosted_rows(const FederatedProblem& problem) {
  std::vector<std::int64_t> rows;
  const int rank = world_rank();
  for (int id = problem.layout->first_client(rank); id < problem.layout->end_client(rank); ++id) {
    rows.insert(rows.end(), problem.client_rows[id].begin(), problem.client_rows[id].end());
    rows.insert(rows.end(), problem.client_test_rows[id].begin(),
                problem.client_test_rows[id].end());
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

void expect_rows_equal(const Table& held, const Table& whole,
                       const std::vector<std::int64_t>& rows) {
  const auto nn = static_cast<std::size_t>(whole.numeric_count()),
             nc = static_cast<std::size_t>(whole.categorical_count());
  for (const auto row : rows) {
    EXPECT_EQ(std::memcmp(held.numeric_row(row), whole.numeric_row(row), nn * sizeof(double)), 0)
        << row;
    EXPECT_EQ(std::memcmp(held.categorical_row(row), whole.categorical_row(row),
                          nc * sizeof(std::int32_t)),
              0)
        << row;
  }
}

void expect_owned(const Deck& deck) {
  const FederatedProblem problem = build_problem(deck);
  const TrainTest whole =
      load_data(DataConfig::from_deck(deck), static_cast<std::uint64_t>(deck.integer("seed")));
  const Table& train = problem.data.train;
  ASSERT_TRUE(train.partial);
  ASSERT_EQ(train.rows, whole.train.rows);
  EXPECT_EQ(train.label, whole.train.label);
  const auto mine = hosted_rows(problem);
  EXPECT_EQ(train.held, mine);
  EXPECT_EQ(train.numeric.size(), mine.size() * static_cast<std::size_t>(train.numeric_count()));
  expect_rows_equal(train, whole.train, mine);

  // Every training row on exactly one rank.
  long held = static_cast<long>(train.held.size());
  MPI_Allreduce(MPI_IN_PLACE, &held, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(static_cast<std::size_t>(held), train.rows);
  const int rank = world_rank(), ranks = world_size();
  if (ranks > 1) {  // a row of the next rank's first client
    const int other = (rank + 1) % ranks;
    const int id = problem.layout->first_client(other);
    if (id < problem.layout->end_client(other)) {
      EXPECT_THROW(train.numeric_row(problem.client_rows[id].front()), std::logic_error);
    }
  }

  // The test rows this rank evaluates (its chunks for the logistic model) and no others.
  const Table& test = problem.data.test;
  ASSERT_TRUE(test.partial);
  ASSERT_EQ(test.held.size(), problem.test.rows);
  for (std::size_t i = 0; i < test.held.size(); ++i)
    EXPECT_EQ(test.held[i], static_cast<std::int64_t>(problem.test.first_row + i));
  expect_rows_equal(test, whole.test, test.held);

  // The standardization from the ranks' rows equals the whole table's, bit for bit.
  const Encoding reference(whole.train, true, true);
  EXPECT_EQ(problem.encoding.means(), reference.means());
  EXPECT_EQ(problem.encoding.scales(), reference.scales());
}

TEST(Ownership, SyntheticRanksHoldOnlyTheirClientsRows) {
  expect_owned(Deck::from_string(kSyntheticDeck, "test", deck_schema()));
}

TEST(Ownership, Hdf5RanksReadOnlyTheirClientsRows) {
  const std::string path = write_hdf5(temporary_h5("ownership"));
  for (const char* driver : {"posix", "mpio"}) {
    SCOPED_TRACE(driver);
    expect_owned(Deck::from_string(hdf5_deck(path, driver), "test", deck_schema()));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove(path);
}

TEST(Ownership, Hdf5ScatteredRowsReadByBothDrivers) {
  const std::string path = write_scattered_hdf5(temporary_h5("scattered"));
  for (const char* features : {"x", "xb"})
    for (const char* driver : {"posix", "mpio"}) {
      SCOPED_TRACE(fmt::format("{} {}", features, driver));
      expect_owned(
          Deck::from_string(scattered_deck(path, features, driver), "test", deck_schema()));
    }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove(path);
}

}  // namespace
}  // namespace fluence
