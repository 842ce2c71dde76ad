// Tests for the array sources (HDF5, TFF, NumPy, LEAF): the same rows written in each format (with
// the HDF5 C API, and byte by byte for .npy/.npz and LEAF's JSON) load the same Table as the CSV
// path, field by field; TFF and LEAF give their natural clients; every damaged or unexpected
// file is an InputError naming the file, the dataset and what was expected.
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "fluence/core/error.hpp"
#include "fluence/data/array_sources.hpp"
#include "fluence/data/partition.hpp"
#include "fluence/data/source.hpp"
#include "support/default_deck.hpp"
#include "support/hdf5_files.hpp"
#include "support/numpy_files.hpp"
#include "support/scratch_files.hpp"

namespace fluence {
namespace {

namespace fs = std::filesystem;
using Strings = std::vector<std::string>;
using testing::Bytes;
using testing::H5Writer;
using testing::npy;
using testing::zip;

// ---------------------------------------------------------------------------------------------
// The reference rows: float32-exact features, labels 0, 2 and 5 (coded as classes "0", "2", "5"),
// and three clients holding contiguous blocks of 7, 12 and 11 rows (TFF and LEAF store a client's
// rows together).

struct Rows {
  std::size_t rows = 0, width = 3;
  std::vector<float> x;
  std::vector<std::int64_t> y;
  std::vector<int> client;  // index into kClients
};

const Strings kClients{"c03", "c07", "c10"};

Rows make_rows(std::size_t rows, int offset, std::vector<std::size_t> block_ends) {
  Rows out;
  out.rows = rows;
  static constexpr std::int64_t kLabels[] = {0, 2, 5};
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t j = 0; j < out.width; ++j)
      out.x.push_back(static_cast<float>((r * 7 + j * 3 + offset) % 19) / 8.0f - 1.0f);
    out.y.push_back(kLabels[(r * 5 + offset) % 3]);
    int block = 0;
    while (r >= block_ends[block]) ++block;
    out.client.push_back(block);
  }
  return out;
}

Rows train_rows() {
  return make_rows(30, 0, {7, 19, 30});
}
Rows test_rows() {
  return make_rows(9, 4, {3, 5, 9});
}

// The rows of one client.
Rows client_rows(const Rows& all, int client) {
  Rows out;
  for (std::size_t r = 0; r < all.rows; ++r) {
    if (all.client[r] != client) continue;
    out.x.insert(out.x.end(), all.x.begin() + r * all.width, all.x.begin() + (r + 1) * all.width);
    out.y.push_back(all.y[r]);
    out.client.push_back(client);
    ++out.rows;
  }
  return out;
}

std::string csv_text(const Rows& rows, char delimiter = ',') {
  std::string text = fmt::format("x0{0}x1{0}x2{0}client{0}y\n", delimiter);
  for (std::size_t r = 0; r < rows.rows; ++r) {
    for (std::size_t j = 0; j < rows.width; ++j)
      text += fmt::format("{:.17g}{}", rows.x[r * rows.width + j], delimiter);
    text += fmt::format("{}{}{}\n", kClients[rows.client[r]], delimiter, rows.y[r]);
  }
  return text;
}

// ---------------------------------------------------------------------------------------------
// Writers: HDF5 through its C API, .npy/.npz and JSON byte by byte.

hsize_t h5(std::size_t n) {
  return static_cast<hsize_t>(n);
}

void write_split_h5(H5Writer& file, const std::string& group, const Rows& rows, bool clients) {
  file.write(group + "/x", H5T_NATIVE_FLOAT, {h5(rows.rows), h5(rows.width)}, rows.x);
  file.write(group + "/y", H5T_NATIVE_INT64, {h5(rows.rows)}, rows.y);
  if (!clients) return;
  Strings ids;
  for (const int c : rows.client) ids.push_back(kClients[c]);
  file.write_strings(group + "/client", ids);
}

// TFF: examples/<client id>/<field>, 32-bit labels as TFF writes them.
void write_tff(const std::string& path, const Rows& rows) {
  H5Writer file(path);
  for (int c = 0; c < 3; ++c) {
    const Rows one = client_rows(rows, c);
    const std::string group = "/examples/" + kClients[c];
    file.write(group + "/x", H5T_NATIVE_FLOAT, {h5(one.rows), h5(one.width)}, one.x);
    std::vector<std::int32_t> labels(one.y.begin(), one.y.end());
    file.write(group + "/y", H5T_NATIVE_INT32, {h5(one.rows)}, labels);
  }
}

template <class T>
Bytes npy_of(const std::string& descr, const std::vector<std::size_t>& shape,
             const std::vector<T>& values) {
  return npy(descr, shape, values.data(), values.size() * sizeof(T));
}

Bytes npy_strings(const Strings& values, std::size_t characters) {
  std::vector<std::uint32_t> codes(values.size() * characters, 0);
  for (std::size_t i = 0; i < values.size(); ++i)
    for (std::size_t k = 0; k < values[i].size(); ++k)
      codes[i * characters + k] = static_cast<unsigned char>(values[i][k]);
  return npy_of(fmt::format("<U{}", characters), {values.size()}, codes);
}

std::vector<std::pair<std::string, Bytes>> npy_members(const Rows& rows, bool clients) {
  std::vector<std::pair<std::string, Bytes>> members{
      {"x.npy", npy_of("<f4", {rows.rows, rows.width}, rows.x)},
      {"y.npy", npy_of("<i8", {rows.rows}, rows.y)}};
  if (clients) {
    Strings ids;
    for (const int c : rows.client) ids.push_back(kClients[c]);
    members.push_back({"client.npy", npy_strings(ids, 3)});
  }
  return members;
}

std::string leaf_json(const Rows& rows, const std::vector<int>& clients) {
  std::string users, samples, data;
  for (const int c : clients) {
    const Rows one = client_rows(rows, c);
    std::string x, y;
    for (std::size_t r = 0; r < one.rows; ++r) {
      std::string row;
      for (std::size_t j = 0; j < one.width; ++j)
        row += fmt::format("{}{:.17g}", j ? ", " : "", one.x[r * one.width + j]);
      x += fmt::format("{}[{}]", r ? ", " : "", row);
      y += fmt::format("{}{}", r ? ", " : "", one.y[r]);
    }
    users += fmt::format("{}\"{}\"", users.empty() ? "" : ", ", kClients[c]);
    samples += fmt::format("{}{}", samples.empty() ? "" : ", ", one.rows);
    data += fmt::format("{}\"{}\": {{\"x\": [{}], \"y\": [{}]}}", data.empty() ? "" : ",\n",
                        kClients[c], x, y);
  }
  return fmt::format("{{\"users\": [{}], \"num_samples\": [{}],\n\"user_data\": {{{}}}}}\n", users,
                     samples, data);
}

// ---------------------------------------------------------------------------------------------

class ArraySourcesTest : public testing::ScratchDirectoryTest {
 protected:
  // The reference rows through the CSV path: train.csv and test.csv, the client column moved out
  // of the features as partition.scheme = "column" does.
  TrainTest csv_tables() const {
    DataConfig config = default_data();
    config.source = "csv";
    config.path = write("train.csv", csv_text(train_rows()));
    config.test_path = write("test.csv", csv_text(test_rows()));
    return load_data(config, 1, "client");
  }
};

using testing::expect_input_error;

void expect_same_table(const Table& a, const Table& b) {
  ASSERT_EQ(a.attributes.size(), b.attributes.size());
  for (std::size_t i = 0; i < a.attributes.size(); ++i) {
    EXPECT_EQ(a.attributes[i].name, b.attributes[i].name);
    EXPECT_EQ(a.attributes[i].kind, b.attributes[i].kind);
    EXPECT_EQ(a.attributes[i].categories, b.attributes[i].categories);
    EXPECT_EQ(a.attributes[i].column, b.attributes[i].column);
  }
  EXPECT_EQ(a.label_name, b.label_name);
  EXPECT_EQ(a.class_names, b.class_names);
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.numeric, b.numeric);  // bitwise: float32 values printed with 17 digits in the CSV
  EXPECT_EQ(a.categorical, b.categorical);
  EXPECT_EQ(a.label, b.label);
  EXPECT_EQ(a.byte_denominator, b.byte_denominator);
  EXPECT_EQ(a.image_shape, b.image_shape);
  EXPECT_EQ(a.client, b.client);
  EXPECT_EQ(a.client_names, b.client_names);
}

void expect_same_data(const TrainTest& a, const TrainTest& b) {
  expect_same_table(a.train, b.train);
  expect_same_table(a.test, b.test);
}

TEST_F(ArraySourcesTest, CsvReferenceHasTheExpectedSchema) {
  const TrainTest csv = csv_tables();
  EXPECT_EQ(csv.train.rows, 30u);
  EXPECT_EQ(csv.test.rows, 9u);
  EXPECT_EQ(csv.train.class_names, (Strings{"0", "2", "5"}));
  EXPECT_EQ(csv.train.client_names, kClients);
  EXPECT_EQ(csv.train.numeric_count(), 3);
  EXPECT_EQ(csv.train.categorical_count(), 0);
  EXPECT_TRUE(csv.test.client.empty());
}

TEST_F(ArraySourcesTest, Hdf5LoadsTheSameTableAsCsv) {
  {
    H5Writer file(path("data.h5"));
    write_split_h5(file, "/train", train_rows(), true);
    write_split_h5(file, "/test", test_rows(), false);
  }
  DataConfig config = default_data();
  config.source = "hdf5";
  config.path = path("data.h5");
  config.arrays = {"/train/x", "/train/y", "/train/client", "", "", "/test/x", "/test/y"};
  const TrainTest hdf5 = load_data(config, 1);
  // The label is named after its dataset.
  EXPECT_EQ(hdf5.train.label_name, "y");
  expect_same_data(hdf5, csv_tables());
}

TEST_F(ArraySourcesTest, Hdf5TestFileHasTheTrainingPaths) {
  {
    H5Writer train(path("train.h5")), test(path("test.h5"));
    write_split_h5(train, "/d", train_rows(), true);
    write_split_h5(test, "/d", test_rows(), false);
  }
  ArrayNames names{"/d/x", "/d/y", "/d/client", "", "", "", ""};
  const TrainTest hdf5 = read_hdf5(path("train.h5"), path("test.h5"), names);
  EXPECT_EQ(hdf5.train.rows, 30u);
  EXPECT_EQ(hdf5.test.rows, 9u);
  // Without any test split the test table is empty (load_data then applies test_fraction).
  EXPECT_EQ(read_hdf5(path("train.h5"), "", names).test.rows, 0u);
}

TEST_F(ArraySourcesTest, TffLoadsTheSameTableAsCsvWithItsClientGroupsAsClients) {
  write_tff(path("train.h5"), train_rows());
  write_tff(path("test.h5"), test_rows());
  DataConfig config = default_data();
  config.source = "tff";
  config.path = path("train.h5");
  config.test_path = path("test.h5");
  const TrainTest tff = load_data(config, 1);
  expect_same_data(tff, csv_tables());
  PartitionConfig partition = PartitionConfig::from_deck(default_deck());
  partition.scheme = "natural";
  partition.clients_given = false;
  const auto clients = partition_rows(tff.train, partition, 1);
  ASSERT_EQ(clients.size(), 3u);
  EXPECT_EQ(clients[0].size(), 7u);
  EXPECT_EQ(clients[1].size(), 12u);
  EXPECT_EQ(clients[2].size(), 11u);
}

TEST_F(ArraySourcesTest, LeafLoadsTheSameTableAsCsvWithItsUsersAsClients) {
  // Two train files read in name order, users in each file's order.
  write("train/b.json", leaf_json(train_rows(), {2}));
  write("train/a.json", leaf_json(train_rows(), {0, 1}));
  write("test/all.json", leaf_json(test_rows(), {0, 1, 2}));
  DataConfig config = default_data();
  config.source = "leaf";
  config.path = path("train");
  config.test_path = path("test");
  const TrainTest leaf = load_data(config, 1);
  expect_same_data(leaf, csv_tables());
  PartitionConfig partition = PartitionConfig::from_deck(default_deck());
  partition.scheme = "natural";
  partition.clients_given = false;
  const auto clients = partition_rows(leaf.train, partition, 1);
  ASSERT_EQ(clients.size(), 3u);
  EXPECT_EQ(clients[0].size(), 7u);
  EXPECT_EQ(clients[1].size(), 12u);
  EXPECT_EQ(clients[2].size(), 11u);
}

TEST_F(ArraySourcesTest, NpzStoredDeflatedAndNpyDirectoryLoadTheSameTableAsCsv) {
  const TrainTest csv = csv_tables();
  DataConfig config = default_data();
  config.source = "npy";
  config.arrays.clients = "client";
  for (const bool deflated : {false, true}) {
    config.path = write("train.npz", zip(npy_members(train_rows(), true), deflated));
    config.test_path = write("test.npz", zip(npy_members(test_rows(), false), deflated));
    expect_same_data(load_data(config, 1), csv);
  }
  for (const auto& [name, bytes] : npy_members(train_rows(), true)) write("train/" + name, bytes);
  for (const auto& [name, bytes] : npy_members(test_rows(), false)) write("test/" + name, bytes);
  config.path = path("train");
  config.test_path = path("test");
  expect_same_data(load_data(config, 1), csv);
}

// The shipped example data (inputs/data, written by numpy and h5py with
// scripts/make_example_data.py): every format loads the CSV's table.
TEST(ExampleData, EveryShippedFormatLoadsTheSameTableAsItsCsv) {
  const std::string data = std::string(FLUENCE_SOURCE_DIR) + "/inputs/data/";
  DataConfig csv = default_data();
  csv.source = "csv";
  csv.path = data + "blobs_train.csv.gz";
  csv.test_path = data + "blobs_test.csv";
  const TrainTest reference = load_data(csv, 1, "client");
  ASSERT_EQ(reference.train.rows, 480u);
  ASSERT_EQ(reference.train.client_names.size(), 12u);
  DataConfig hdf5 = default_data();
  hdf5.source = "hdf5";
  hdf5.path = data + "blobs.h5";
  hdf5.arrays = {"/train/x", "/train/y", "/train/client", "/names", "", "/test/x", "/test/y"};
  DataConfig npz = default_data();
  npz.source = "npy";
  npz.path = data + "blobs.npz";
  npz.arrays = {"x_train", "y_train", "client_train", "names", "", "x_test", "y_test"};
  DataConfig tff = default_data();
  tff.source = "tff";
  tff.path = data + "blobs_tff_train.h5";
  tff.test_path = data + "blobs_tff_test.h5";
  tff.arrays.labels = "label";
  DataConfig leaf = default_data();
  leaf.source = "leaf";
  leaf.path = data + "blobs_leaf/train";
  leaf.test_path = data + "blobs_leaf/test";
  for (const DataConfig* config : {&hdf5, &npz, &tff, &leaf}) {
    SCOPED_TRACE(config->source);
    TrainTest loaded = load_data(*config, 1);
    // The label's name differs by format, and TFF and LEAF have no column names (x0, x1, ...);
    // the values, classes and clients may not differ.
    const bool named = !config->arrays.names.empty();
    for (Table* table : {&loaded.train, &loaded.test}) {
      table->label_name = reference.train.label_name;
      for (std::size_t j = 0; j < table->attributes.size() && !named; ++j)
        table->attributes[j].name = reference.train.attributes[j].name;
    }
    expect_same_data(loaded, reference);
  }
}

TEST_F(ArraySourcesTest, Hdf5ColumnNamesComeFromADatasetOrAnAttribute) {
  {
    H5Writer file(path("named.h5"));
    write_split_h5(file, "/train", train_rows(), false);
    file.write_strings("/columns", {"age", "height", "weight"});
    file.write_strings_attribute("/train/x", "names", {"a", "b", "c"});
  }
  ArrayNames names{"/train/x", "/train/y", "", "/columns", "", "", ""};
  auto data = read_hdf5(path("named.h5"), "", names);
  EXPECT_EQ(data.train.attributes[1].name, "height");
  names.names.clear();
  names.names_attribute = "names";
  data = read_hdf5(path("named.h5"), "", names);
  EXPECT_EQ(data.train.attributes[2].name, "c");
  names.names_attribute.clear();
  EXPECT_EQ(read_hdf5(path("named.h5"), "", names).train.attributes[0].name, "x0");
}

TEST_F(ArraySourcesTest, Uint8ImagesArePixelsOverTwoHundredFiftyFiveWithTheirShape) {
  const std::vector<std::uint8_t> pixels{0, 255, 17, 3, 9, 200, 1, 2, 4, 8, 16, 32};  // 3 x 2 x 2
  const std::vector<std::int32_t> labels{1, 0, 1}, clients{8, 12, 8};
  {
    H5Writer file(path("images.h5"));
    file.write("/x", H5T_NATIVE_UCHAR, {3, 2, 2}, pixels);
    file.write("/y", H5T_NATIVE_INT32, {3}, labels);
    file.write("/id", H5T_NATIVE_INT32, {3}, clients);
  }
  const auto data = read_hdf5(path("images.h5"), "", {"x", "y", "id", "", "", "", ""});
  EXPECT_EQ(data.train.image_shape, (std::array<int, 3>{2, 2, 1}));
  EXPECT_EQ(data.train.byte_denominator, 255.0);
  for (std::size_t i = 0; i < pixels.size(); ++i)
    EXPECT_EQ(data.train.numeric[i], pixels[i] / 255.0);
  // Integer client ids sort numerically: 8 before 12.
  EXPECT_EQ(data.train.client_names, (Strings{"8", "12"}));
  EXPECT_EQ(data.train.client, (std::vector<std::int32_t>{0, 1, 0}));
  // The same as .npy, and as LEAF's nested rows.
  write("img/x.npy", npy_of("|u1", {3, 2, 2}, pixels));
  write("img/y.npy", npy_of("<i4", {3}, labels));
  const auto npy_data = read_npy(path("img"), "", default_data().arrays);
  EXPECT_EQ(npy_data.train.numeric, data.train.numeric);
  EXPECT_EQ(npy_data.train.image_shape, data.train.image_shape);
  write("nested.json",
        "{\"users\": [\"u\"], \"num_samples\": [2], \"user_data\": {\"u\": {\"x\": [[[1, 2], [3, "
        "4]], [[5, 6], [7, 8]]], \"y\": [0, 1]}}}");
  const auto leaf = read_leaf(path("nested.json"), "");
  EXPECT_EQ(leaf.train.image_shape, (std::array<int, 3>{2, 2, 1}));
  EXPECT_EQ(leaf.train.numeric, (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}));
}

// uint64 client ids and labels at or above 2^63 (hashed ids) were read through int64 and clamped
// by HDF5: 12 clients became one, and so did the labels (issue 41). They are kept exact, ordered
// and named as unsigned numbers.
TEST_F(ArraySourcesTest, Hdf5Uint64IdsAndLabelsBeyondInt64AreKeptExact) {
  constexpr std::uint64_t kTop = std::uint64_t{1} << 63;
  std::vector<std::uint64_t> ids, labels;
  std::vector<float> x;
  for (std::uint64_t r = 0; r < 24; ++r) {
    ids.push_back(kTop + (11 - r % 12) * 1000003);  // 12 clients, all >= 2^63
    labels.push_back(r % 3 == 0 ? UINT64_MAX : kTop + r % 3);
    x.push_back(static_cast<float>(r));
  }
  ids[23] = 7;  // one small id: it sorts before the others
  {
    H5Writer file(path("u64.h5"));
    file.write("/x", H5T_NATIVE_FLOAT, {24, 1}, x);
    file.write("/y", H5T_NATIVE_UINT64, {24}, labels);
    file.write("/id", H5T_NATIVE_UINT64, {24}, ids);
    file.write("/test_x", H5T_NATIVE_FLOAT, {2, 1}, std::vector<float>{1, 2});
    file.write("/test_y", H5T_NATIVE_INT64, {2}, std::vector<std::int64_t>{5, 1});
    file.write("/negative_y", H5T_NATIVE_INT64, {2}, std::vector<std::int64_t>{-1, 1});
    file.write("/small_y", H5T_NATIVE_UINT64, {24}, std::vector<std::uint64_t>(24, 3));
  }
  const auto data =
      read_hdf5(path("u64.h5"), "", {"/x", "/y", "/id", "", "", "/test_x", "/test_y"});
  ASSERT_EQ(data.train.client_names.size(), 13u);
  EXPECT_EQ(data.train.client_names.front(), "7");
  EXPECT_EQ(data.train.client_names[1], std::to_string(kTop));
  EXPECT_EQ(data.train.client_names.back(), std::to_string(kTop + 11 * 1000003));
  EXPECT_EQ(data.train.client[0], 12);  // kTop + 11 * 1000003
  EXPECT_EQ(data.train.client[23], 0);  // 7
  // Classes in unsigned order, the test split's small labels merged with the training split's.
  EXPECT_EQ(data.train.class_names,
            (Strings{"1", "5", std::to_string(kTop + 1), std::to_string(kTop + 2),
                     std::to_string(UINT64_MAX)}));
  EXPECT_EQ(data.train.label[0], 4);
  EXPECT_EQ(data.train.label[1], 2);
  EXPECT_EQ(data.test.label, (std::vector<std::int32_t>{1, 0}));
  // A uint64 dataset within int64 reads as before.
  const auto small = read_hdf5(path("u64.h5"), "", {"/x", "/small_y", "/id", "", "", "", ""});
  EXPECT_EQ(small.train.class_names, (Strings{"3"}));
  // Values beyond int64 and negative values have no common order: refused, both named.
  expect_input_error(
      [&] {
        read_hdf5(path("u64.h5"), "", {"/x", "/y", "", "", "", "/test_x", "/negative_y"});
      },
      {path("u64.h5"), "/y", std::to_string(UINT64_MAX), "/negative_y", "-1",
       "cannot be ordered together"});
}

// ---------------------------------------------------------------------------------------------
// Bad input: one message naming the file, the dataset (array, user) and what was expected.

TEST_F(ArraySourcesTest, Hdf5BadInputNamesFileDatasetAndExpectation) {
  {
    H5Writer file(path("bad.h5"));
    write_split_h5(file, "/train", train_rows(), false);
    write_split_h5(file, "/test", test_rows(), false);
    file.write("/float_y", H5T_NATIVE_DOUBLE, {30}, std::vector<double>(30, 1.0));
    file.write("/int16_x", H5T_NATIVE_SHORT, {30, 2}, std::vector<std::int16_t>(60, 1));
    file.write("/flat", H5T_NATIVE_FLOAT, {30}, std::vector<float>(30, 1.0f));
  }
  const std::string file = path("bad.h5");
  auto read = [&](ArrayNames names) { return read_hdf5(file, "", names); };
  expect_input_error(
      [&] {
        read({"/train/x", "/float_y", "", "", "", "", ""});
      },
      {file, "/float_y", "float64", "expected integer"});
  expect_input_error(
      [&] {
        read({"/int16_x", "/train/y", "", "", "", "", ""});
      },
      {file, "/int16_x", "int16", "expected float32, float64 or uint8 features"});
  expect_input_error(
      [&] {
        read({"/flat", "/train/y", "", "", "", "", ""});
      },
      {file, "/flat", "1 dimension", "rows x columns"});
  expect_input_error(
      [&] {
        read({"/train/nope", "/train/y", "", "", "", "", ""});
      },
      {file, "/train/nope", "no such dataset"});
  expect_input_error(
      [&] {
        read({"/missing/x", "/train/y", "", "", "", "", ""});
      },
      {file, "/missing/x", "no such dataset"});
  expect_input_error(
      [&] {
        read({"/train", "/train/y", "", "", "", "", ""});
      },
      {file, "/train", "not a dataset"});
  expect_input_error(
      [&] {
        read({"/train/x", "/test/y", "", "", "", "", ""});
      },
      {file, "/train/x", "30 rows", "/test/y", "9 labels"});
  expect_input_error(
      [&] {
        read({"/train/x", "/train/y", "", "/test/y", "", "", ""});
      },
      {file, "/test/y", "expected a 1-D array of strings"});
  expect_input_error([&] { read_tff(file, "", default_data().arrays); },
                     {file, "no group 'examples'"});
  // A file cut short, and a file that is not HDF5 at all.
  const auto size = fs::file_size(file);
  fs::copy_file(file, path("cut.h5"));
  fs::resize_file(path("cut.h5"), size / 2);
  expect_input_error(
      [&] {
        read_hdf5(path("cut.h5"), "", {"/train/x", "/train/y", "", "", "", "", ""});
      },
      {path("cut.h5"), "truncated or damaged"});
  expect_input_error([&] { read_hdf5(write("text.h5", "no"), "", default_data().arrays); },
                     {path("text.h5"), "not an HDF5 file"});
}

TEST_F(ArraySourcesTest, TffClientWithMismatchedFieldsIsNamed) {
  {
    H5Writer file(path("tff.h5"));
    file.write("/examples/a/x", H5T_NATIVE_FLOAT, {2, 3}, std::vector<float>(6, 0.5f));
    file.write("/examples/a/y", H5T_NATIVE_INT32, {3}, std::vector<std::int32_t>{0, 1, 1});
  }
  expect_input_error([&] { read_tff(path("tff.h5"), "", default_data().arrays); },
                     {path("tff.h5"), "/examples/a/x", "2 rows", "/examples/a/y", "3 labels"});
}

TEST_F(ArraySourcesTest, LeafBadInputNamesFileUserAndExpectation) {
  auto leaf = [&](const std::string& text) { return read_leaf(write("bad.json", text), ""); };
  const std::string file = path("bad.json");
  expect_input_error(
      [&] {
        leaf(
            R"({"users": ["u"], "num_samples": [3], "user_data": {"u": {"x": [[1], [2]], "y": [0, 1]}}})");
      },
      {file, "user 'u' is ragged", "num_samples says 3", "x has 2 rows"});
  expect_input_error(
      [&] {
        leaf(
            R"({"users": ["u"], "num_samples": [2], "user_data": {"u": {"x": [[1, 2], [3]], "y": [0, 1]}}})");
      },
      {file + ":1:", "user 'u': x row 1 has shape [1] but row 0 has [2]"});
  expect_input_error(
      [&] {
        leaf(
            R"({"users": ["u", "v"], "num_samples": [1, 1], "user_data": {"u": {"x": [[1]], "y": [0]}}})");
      },
      {file, "user 'v' is in users but has no user_data"});
  expect_input_error(
      [&] {
        leaf(
            R"({"users": ["u"], "num_samples": [1], "user_data": {"u": {"x": [["a"]], "y": [0]}}})");
      },
      {file, "x holds text"});
  expect_input_error([&] { leaf(R"({"users": ["u"], "num_samples": [1], "user_data": {"u": )"); },
                     {file, "ends early"});
  expect_input_error([&] { leaf(R"({"users": [], "user_data": {}})"); }, {file, "num_samples"});
  expect_input_error([&] { read_leaf(path("none"), ""); }, {"cannot read data file"});
  // Nesting without end (an x row 200,000 arrays deep, or an unknown key's value 1,000 objects
  // deep) is refused at 64 levels, not a stack overflow (issue 41).
  const std::string deep(200000, '[');
  expect_input_error(
      [&] {
        leaf(R"({"users": ["u"], "num_samples": [1], "user_data": {"u": {"x": [)" + deep + "]}}}");
      },
      {file, "nested more than 64 deep"});
  std::string objects;
  for (int k = 0; k < 1000; ++k) objects += "{\"a\": ";
  expect_input_error([&] { leaf(R"({"users": ["u"], "extra": )" + objects); },
                     {file, "nested more than 64 deep"});
}

TEST_F(ArraySourcesTest, NpyBadInputNamesFileArrayAndExpectation) {
  const Rows rows = train_rows();
  const std::vector<std::int64_t> labels = rows.y;
  write("d/y.npy", npy_of("<i8", {30}, labels));
  auto features = [&](const Bytes& bytes) {
    write("d/x.npy", bytes);
    return read_npy(path("d"), "", default_data().arrays);
  };
  const std::string x = path("d/x.npy");
  expect_input_error([&] { features("not numpy at all"); }, {x, "not a .npy array"});
  expect_input_error([&] { features(npy_of(">f4", {30, 3}, rows.x)); }, {x, "big-endian"});
  expect_input_error(
      [&] {
        features(npy(("<f4"), {30, 3}, rows.x.data(), 4 * 90, "True"));
      },
      {x, "Fortran order"});
  expect_input_error(
      [&] {
        features(npy_of("<f4", {30, 3}, rows.x).substr(0, 200));
      },
      {x, "(30, 3) of <f4 needs 360 bytes", "holds 72", "truncated"});
  expect_input_error(
      [&] {
        features(npy_of("<i4", {30, 3}, std::vector<std::int32_t>(90)));
      },
      {x, "dtype i4", "expected float32, float64 or uint8 features"});
  Bytes broken = npy_of("<f4", {30, 3}, rows.x);
  broken.replace(broken.find("'shape'"), 7, "'shapf'");
  expect_input_error([&] { features(broken); }, {x, "a bad .npy header", "'shapf'"});
  expect_input_error(
      [&] {
        features(npy_of("<f4", {29, 3}, std::vector<float>(87)));
      },
      {x, "29 rows", path("d/y.npy"), "30 labels"});
  // A damaged archive, and an array it does not hold.
  Bytes archive = zip(npy_members(rows, false), true);
  archive[40] = static_cast<char>(archive[40] ^ 0x55);
  write("bad.npz", archive);
  expect_input_error([&] { read_npy(path("bad.npz"), "", default_data().arrays); },
                     {path("bad.npz"), "member x.npy"});
  write("good.npz", zip(npy_members(rows, false), false));
  expect_input_error(
      [&] {
        read_npy(path("good.npz"), "", {"features", "y", "", "", "", "", ""});
      },
      {path("good.npz"), "no array 'features'", "x.npy, y.npy"});
}

}  // namespace
}  // namespace fluence
