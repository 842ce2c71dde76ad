// Distributed ownership (issue 25), at 1-4 ranks: after build_problem each rank's training table
// holds the values of exactly the rows of the clients it hosts (their training and local test
// rows), its test table those of the test rows it evaluates, each equal bitwise to the row of the
// whole table as load_data reads it; no row is held twice, none is left out; a row of another
// rank's client is refused; and the standardization reduced over the ranks equals, bit for bit,
// the one computed from the whole table on one rank. For synthetic data and for files the test
// writes: HDF5, read with both data.hdf5_driver values, "posix" (independent reads) and "mpio"
// (collective MPI-IO reads, checked against load_data's POSIX read of the whole file), also with
// rows scattered over the file (an iid partition: thousands of runs of rows per rank, so several
// collective rounds, a different number on each rank) and uint8 and float64 features; CSV (plain
// and gzip, with blank lines, quoted fields, dropped rows, a column partition), ARFF (with '?'
// categories and a column partition) and NumPy (a stored .npz and a directory of .npy files),
// whose readers stream the file and keep only the wanted rows.
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>
#include <zlib.h>

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
#include "fluence/data/partition.hpp"
#include "fluence/data/source.hpp"
#include "fluence/fl/problem.hpp"
#include "support/hdf5_files.hpp"
#include "support/numpy_files.hpp"
#include "support/synthetic_deck.hpp"

namespace fluence {
namespace {

const std::string kSyntheticDeck =
    testing::synthetic_deck({.seed = 9,
                             .rows = 1500,
                             .numeric = 3,
                             .categorical = {3, 2},
                             .classes = 3,
                             .clients = 7,
                             .partition = "scheme = \"dirichlet\"\nlocal_test_fraction = 0.2\n"});

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
    testing::H5Writer file(path);
    file.write("x", H5T_NATIVE_FLOAT, {rows, width}, x);
    file.write("y", H5T_NATIVE_INT64, {rows}, y);
    file.write("client", H5T_NATIVE_INT64, {rows}, client);
    file.write("test_x", H5T_NATIVE_FLOAT, {test_rows, width}, tx);
    file.write("test_y", H5T_NATIVE_INT64, {test_rows}, ty);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

// A deck on the arrays write_hdf5 (or npy_arrays) wrote, their clients as natural clients;
// `data_lines` adds keys to [data] (the source, its path, the driver).
std::string array_deck(const std::string& data_lines) {
  return fmt::format(R"(
seed = 4
[data]
{}
[data.arrays]
clients = "client"
test_features = "test_x"
test_labels = "test_y"
[partition]
scheme = "natural"
local_test_fraction = 0.1
)",
                     data_lines);
}

std::string hdf5_deck(const std::string& path, const std::string& driver) {
  return array_deck(
      fmt::format("source = \"hdf5\"\npath = \"{}\"\nhdf5_driver = \"{}\"", path, driver));
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
    testing::H5Writer file(path);
    file.write("x", H5T_NATIVE_DOUBLE, {rows, width}, x);
    file.write("xb", H5T_NATIVE_UCHAR, {rows, width}, xb);
    file.write("y", H5T_NATIVE_INT64, {rows}, y);
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

// A temporary path, the same on every rank.
std::string temporary(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         fmt::format("fluence_ownership_{}_{}", broadcast_string(std::to_string(::getpid())), name);
}

// A CSV table of 700 rows: two numeric columns (written with the shortest decimal that reads
// back as the same double, so the values are exact), a categorical colour (some quoted), a site
// (the clients of partition.scheme = "column"), a text column the decks drop (refused if it were
// read as a number), and a label "a"/"b"/"c". Every 50th row misses num1 ("NA"), every 97th is
// followed by a blank line: the rows kept are not the lines.
std::string csv_text(int rows, double phase) {
  static const char* colours[] = {"red", "green", "\"blue\""};
  static const char* labels[] = {"a", "b", "c"};
  std::string text = "num0,colour,site,unused,num1,label\n";
  for (int r = 0; r < rows; ++r) {
    const std::string num1 = r % 50 == 7 ? "NA" : fmt::format("{}", std::cos(phase * r) / 3);
    text += fmt::format("{},{},s{},x{},{},{}\n", std::sin(0.37 * r + phase) * 3,
                        colours[(r * 5 / 3) % 3], r / 60, r, num1, labels[(r * 7 + r / 13) % 3]);
    if (r % 97 == 3) text += "\n";
  }
  return text;
}

// The same kind of table as ARFF: nominal colour (with '?' values, which become a category of
// their own) and site, comment and blank lines between the rows.
std::string arff_text(int rows) {
  static const char* colours[] = {"red", "green", "?"};
  std::string text =
      "% a test table\n@relation t\n@attribute num0 numeric\n@attribute colour {red, green, "
      "blue}\n@attribute site {s0, s1, s2, s3, s4, s5, s6, s7, s8, s9}\n@attribute num1 real\n"
      "@attribute label {a, b, c}\n@data\n";
  for (int r = 0; r < rows; ++r) {
    text += fmt::format("{}, {}, s{}, {}, {}\n", std::sin(0.41 * r) * 3, colours[(r * 5 / 3) % 3],
                        r / 60, std::cos(0.2 * r) / 3, "abc"[(r * 7 + r / 13) % 3]);
    if (r % 89 == 5) text += "% a comment\n\n";
  }
  return text;
}

// Writes `text` (gzip-compressed, or as it is); on the calling rank only.
void write_file(const std::string& path, const std::string& text, bool gzip) {
  gzFile file = gzopen(path.c_str(), gzip ? "wb" : "wbT");
  gzwrite(file, text.data(), static_cast<unsigned>(text.size()));
  gzclose(file);
}

// Collective: rank 0 writes the file, the others wait for it.
void write_text(const std::string& path, const std::string& text, bool gzip) {
  if (world_rank() == 0) write_file(path, text, gzip);
  MPI_Barrier(MPI_COMM_WORLD);
}

// The arrays of write_hdf5's file as NumPy arrays: 600 rows x 4 float32 features, labels, 12
// client blocks, and a 200-row test split (x, y, client, test_x, test_y).
std::vector<std::pair<std::string, std::string>> npy_arrays() {
  const std::size_t rows = 600, test_rows = 200, width = 4;
  std::vector<float> x(rows * width), tx(test_rows * width);
  std::vector<std::int64_t> y(rows), ty(test_rows), client(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t j = 0; j < width; ++j)
      x[r * width + j] =
          static_cast<float>(std::sin(0.53 * static_cast<double>(r * width + j)) * 2);
    y[r] = static_cast<std::int64_t>((r * 5 + r / 11) % 3);
    client[r] = static_cast<std::int64_t>(r / 50);
  }
  for (std::size_t r = 0; r < test_rows; ++r) {
    for (std::size_t j = 0; j < width; ++j)
      tx[r * width + j] = static_cast<float>(std::cos(0.19 * static_cast<double>(r * width + j)));
    ty[r] = static_cast<std::int64_t>(r % 3);
  }
  return {{"x.npy", testing::npy("<f4", {rows, width}, x.data(), 4 * x.size())},
          {"y.npy", testing::npy("<i8", {rows}, y.data(), 8 * y.size())},
          {"client.npy", testing::npy("<i8", {rows}, client.data(), 8 * client.size())},
          {"test_x.npy", testing::npy("<f4", {test_rows, width}, tx.data(), 4 * tx.size())},
          {"test_y.npy", testing::npy("<i8", {test_rows}, ty.data(), 8 * ty.size())}};
}

std::string npy_deck(const std::string& path) {
  return array_deck(fmt::format("source = \"npy\"\npath = \"{}\"", path));
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
  const PartitionConfig partition = PartitionConfig::from_deck(deck);
  const TrainTest whole =
      load_data(DataConfig::from_deck(deck), static_cast<std::uint64_t>(deck.integer("seed")),
                partition.scheme == "column" ? partition.column : "");
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

TEST(Ownership, CsvRanksKeepOnlyTheirClientsRows) {
  // A column partition with the test rows split off the same file.
  const std::string column_csv = temporary("column.csv");
  write_text(column_csv, csv_text(700, 0.0), false);
  expect_owned(Deck::from_string(fmt::format(R"(
seed = 5
[data]
source = "csv"
path = "{}"
categorical = ["colour"]
missing = "drop"
drop = ["unused"]
[partition]
scheme = "column"
column = "site"
local_test_fraction = 0.1
)",
                                             column_csv),
                                 "test", deck_schema()));
  // A gzip-compressed training file and a separate test file.
  const std::string train_gz = temporary("train.csv.gz"), test_csv = temporary("test.csv");
  write_text(train_gz, csv_text(700, 0.3), true);
  write_text(test_csv, csv_text(150, 0.9), false);
  expect_owned(Deck::from_string(fmt::format(R"(
seed = 8
[data]
source = "csv"
path = "{}"
test_path = "{}"
categorical = ["colour", "site"]
missing = "drop"
features = ["num0", "colour", "num1"]
[partition]
clients = 6
scheme = "dirichlet"
)",
                                             train_gz, test_csv),
                                 "test", deck_schema()));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0)
    for (const auto& path : {column_csv, train_gz, test_csv}) std::filesystem::remove(path);
}

TEST(Ownership, ArffRanksKeepOnlyTheirClientsRows) {
  const std::string arff = temporary("table.arff");
  write_text(arff, arff_text(600), false);
  expect_owned(Deck::from_string(fmt::format(R"(
seed = 3
[data]
source = "arff"
path = "{}"
[partition]
scheme = "column"
column = "site"
local_test_fraction = 0.1
)",
                                             arff),
                                 "test", deck_schema()));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove(arff);
}

TEST(Ownership, NpyRanksReadOnlyTheirClientsRows) {
  const std::string npz = temporary("stored.npz"), folder = temporary("npy");
  if (world_rank() == 0) {
    write_file(npz, testing::zip(npy_arrays(), false), false);
    std::filesystem::create_directory(folder);
    for (const auto& [name, bytes] : npy_arrays()) write_file(folder + "/" + name, bytes, false);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (const auto& path : {npz, folder})
    expect_owned(Deck::from_string(npy_deck(path), "test", deck_schema()));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    std::filesystem::remove(npz);
    std::filesystem::remove_all(folder);
  }
}

}  // namespace
}  // namespace fluence
