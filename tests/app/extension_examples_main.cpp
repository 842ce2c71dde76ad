// docs/extending.md's worked examples of a new data source and a new model kind, built and run by
// the suite: a source that reads a tiny text format and a network kind made of layers are
// registered from outside src/, become choices of data.source and model.type (`fluence keys`),
// have their keys checked like the built-ins', and `fluence train` runs them through the normal
// pipeline (load_data, the partition, the federation, results.h5). Its own binary: the choices it
// registers must not reach the unit tests' schema, whose tables are inputs/README.md's.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "fluence/app/cli.hpp"
#include "fluence/app/commands.hpp"
#include "fluence/app/deck_schema.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/data/data_source.hpp"
#include "fluence/model/build.hpp"
#include "support/scratch_files.hpp"

namespace fluence {
namespace {

// --- the worked example (docs/extending.md "A data source") ---------------------------------
// 1. The reader: one row a line, the class label first, then the numeric features, separated by
//    blanks; lines starting with '#' are comments. Every problem is an InputError naming the
//    file and the line.
Table read_labelled_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot be read", path));
  Table table;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    int label = -1;
    std::vector<double> values;
    fields >> label;
    for (double value; fields >> value;) values.push_back(value);
    if (label < 0 || !fields.eof() || values.empty())
      throw InputError(
          fmt::format("{}:{}: expected a class label (0, 1, ...) and numbers", path, number));
    if (table.attributes.empty())
      for (std::size_t j = 0; j < values.size(); ++j)
        table.attributes.push_back(
            {fmt::format("x{}", j), AttributeKind::numeric, {}, static_cast<int>(j)});
    if (values.size() != table.attributes.size())
      throw InputError(fmt::format("{}:{}: another number of features", path, number));
    while (table.classes() <= label) table.class_names.push_back(std::to_string(table.classes()));
    table.append_row(values.data(), nullptr, label);
  }
  if (table.rows == 0) throw InputError(fmt::format("{}: no rows", path));
  return table;
}

// 2. One table entry: its name, the keys it reads beyond the common ones (none), and whole
//    reading; the test rows come from data.test_path when given, else data.test_fraction splits
//    them off. Without `selective`, every rank reads the file and keeps its clients' rows.
DataSourceSpec labelled_lines_source() {
  return {.name = "labelled_lines",
          .read = [](const DataConfig& config, std::uint64_t, const std::string&) {
            TrainTest data;
            data.train = read_labelled_lines(config.path);
            data.test = config.test_path.empty() ? data.train.empty_like()
                                                 : read_labelled_lines(config.test_path);
            return data;
          }};
}
// --- end of the worked example ---------------------------------------------------------------

// --- the worked example (docs/extending.md "A model kind") ----------------------------------
// A network from layers: a tanh dense layer as wide as the inputs, then model.hidden's layers
// with model.activation, then the logits; model.bias, model.init and model.l2 as for mlp.
std::unique_ptr<Model> build_tanh_stem(const Deck& deck, const ModelInputs& inputs) {
  const NetworkSettings settings = NetworkSettings::from_deck(deck);
  NetworkSpec spec = NetworkSpec::mlp(inputs.features, settings.hidden, settings.activation,
                                      inputs.classes, settings.bias);
  spec.layers.insert(spec.layers.begin(),
                     {LayerSpec{LayerKind::dense, inputs.features}, LayerSpec{LayerKind::tanh}});
  return build_network(deck, spec, inputs.classes);
}

ModelKindSpec tanh_stem_kind() {
  return {.name = "tanh_stem",
          .keys = {"model.l2", "model.bias", "model.hidden", "model.activation", "model.init"},
          .create = build_tanh_stem};
}
// --- end of the worked example ---------------------------------------------------------------

app::CommandLine parse(std::vector<std::string> words, std::string* printed = nullptr) {
  words.insert(words.begin(), "fluence");
  std::vector<char*> argv;
  for (auto& word : words) argv.push_back(word.data());
  std::ostringstream out;
  auto* saved = std::cout.rdbuf(out.rdbuf());
  app::CommandLine line = app::parse_command_line(static_cast<int>(argv.size()), argv.data());
  std::cout.rdbuf(saved);
  if (printed) *printed = out.str();
  return line;
}

// Two classes on either side of x0 + x1 = 0, one row in eight labelled against it.
std::string labelled_lines(int rows, int offset) {
  std::string text = "# label x0 x1\n";
  for (int r = 0; r < rows; ++r) {
    const double x0 = ((r + offset) * 37 % 101) / 50.0 - 1.0,
                 x1 = ((r + offset) * 61 % 89) / 44.0 - 1.0;
    const int label = (x0 + x1 > 0) != (r % 8 == 0) ? 1 : 0;
    text += fmt::format("{} {} {}\n", label, x0, x1);
  }
  return text;
}

std::vector<hsize_t> dataset_shape(const std::string& file, const std::string& dataset) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  const hid_t space = H5Dget_space(d);
  std::vector<hsize_t> dims(static_cast<std::size_t>(H5Sget_simple_extent_ndims(space)));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
  return dims;
}

class ExtensionExamples : public testing::ScratchDirectoryTest {
 protected:
  std::string write_deck() {
    write("train.txt", labelled_lines(120, 0));
    write("test.txt", labelled_lines(40, 500));
    return write("deck.toml", R"(seed = 3
[data]
source = "labelled_lines"
path = "train.txt"
test_path = "test.txt"
[partition]
clients = 4
[model]
type = "tanh_stem"
hidden = [3]
activation = "relu"
[federation]
rounds = 3
local_epochs = 1
batch_size = 10
learning_rate = 0.1
[output]
dir = "out"
)");
  }
};

TEST_F(ExtensionExamples, ARegisteredSourceAndModelKindAreChoicesOfTheirKeys) {
  const KeySpec* source = deck_schema().find("data.source");
  const KeySpec* type = deck_schema().find("model.type");
  ASSERT_TRUE(source && type);
  EXPECT_EQ(source->choices.back(), "labelled_lines");
  EXPECT_EQ(type->choices.back(), "tanh_stem");
  EXPECT_EQ(source->choices.front(), "synthetic");  // the built-ins keep their order
  EXPECT_EQ(type->choices.front(), "logistic");
}

TEST_F(ExtensionExamples, TheSourceReadsThroughLoadData) {
  const std::string deck_path = write_deck();
  const Deck deck = Deck::from_file(deck_path, deck_schema());
  const TrainTest data = load_data(DataConfig::from_deck(deck), 3);
  EXPECT_EQ(data.train.rows, 120u);
  EXPECT_EQ(data.test.rows, 40u);
  EXPECT_EQ(data.train.numeric_count(), 2);
  EXPECT_EQ(data.train.classes(), 2);
}

TEST_F(ExtensionExamples, KeysOfOtherSourcesAreRefusedNamingTheSourcesThatReadThem) {
  const std::string deck = write_deck();
  const app::CommandLine line =
      parse({"validate", deck, "--no-data", "--set", "data.delimiter=\";\""});
  ASSERT_FALSE(line.exit_code.has_value());
  EXPECT_EQ(app::run_command(line), app::kExitInput);
  testing::expect_input_error(
      [&] {
        DataConfig::from_deck(Deck::from_file(deck, deck_schema(), {"data.delimiter=\";\""}));
      },
      {"data.delimiter applies only to data.source = \"csv\"",
       "(here data.source = \"labelled_lines\")"});
}

TEST_F(ExtensionExamples, TrainRunsTheSourceAndTheModelKind) {
  const std::string deck = write_deck();
  const app::CommandLine line = parse({"train", deck, "--quiet", "--out", path("out")});
  ASSERT_FALSE(line.exit_code.has_value());
  ASSERT_EQ(app::run_command(line), 0);
  // tanh_stem on 2 inputs (no bias column): 2x2 + 2 (stem), 3x2 + 3 (hidden), 2x3 + 2 (logits).
  const std::vector<hsize_t> theta = dataset_shape(path("out/results.h5"), "/model/theta");
  std::size_t parameters = 1;
  for (const hsize_t d : theta) parameters *= d;
  EXPECT_EQ(parameters, 6u + 9u + 8u);
}

}  // namespace
}  // namespace fluence

int main(int argc, char** argv) {
  // Before anything builds the deck schema (data.source's and model.type's choices).
  fluence::register_data_source(fluence::labelled_lines_source());
  fluence::register_model_kind(fluence::tanh_stem_kind());
  ::testing::InitGoogleTest(&argc, argv);
  fluence::Environment environment(&argc, &argv);
  return RUN_ALL_TESTS();
}
