// Tests for what a new user's CSV needs (issue 25): a delimiter, quoted fields, missing values
// refused or dropped, .csv.gz, columns chosen by data.features / data.drop, paths taken from the
// deck file's directory, and labels that are not a class label refused; and for the [data] keys'
// cross-checks.
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/data/loaders.hpp"
#include "fluence/data/source.hpp"
#include "support/default_deck.hpp"
#include "support/scratch_files.hpp"

namespace fluence {
namespace {

using Strings = std::vector<std::string>;
using CsvTest = testing::ScratchDirectoryTest;
using testing::expect_input_error;

Strings attribute_names(const Table& table) {
  Strings names;
  for (const auto& attribute : table.attributes) names.push_back(attribute.name);
  return names;
}

Deck deck_of(const std::string& text) {
  return Deck::from_string(text, "deck.toml", deck_schema());
}

// The csv dialect a deck gives with `keys` in its [data] section (the declared defaults for the
// others).
CsvOptions csv_dialect(const std::string& keys = "") {
  return DataConfig::from_deck(deck_of("[data]\nsource = \"csv\"\npath = \"a.csv\"\n" + keys)).csv;
}

TEST_F(CsvTest, SemicolonAndTabDelimitersWithQuotedFields) {
  const auto semicolon =
      write("s.csv",
            "\"name; full\";v;y\n"
            "\"Smith; J\"; 1,5 ;a\n"  // 1,5 is text here: the comma is no delimiter
            "Doe;2;b\n");
  const auto data =
      read_csv(semicolon, "", {"", {"name; full", "v"}}, csv_dialect("delimiter = \";\"\n"));
  EXPECT_EQ(attribute_names(data.train), (Strings{"name; full", "v"}));
  EXPECT_EQ(data.train.attributes[0].categories, (Strings{"Doe", "Smith; J"}));
  EXPECT_EQ(data.train.attributes[1].categories, (Strings{"1,5", "2"}));
  // A tab delimiter keeps blanks inside fields and drops those around them.
  const auto tab = write("t.tsv", "a\tb c\ty\n 1 \tx y\t0\n2\t\"p\tq\"\t1\n");
  const auto tsv = read_csv(tab, "", {"", {"b c"}}, csv_dialect("delimiter = \"\\t\"\n"));
  EXPECT_EQ(tsv.train.numeric, (std::vector<double>{1, 2}));
  EXPECT_EQ(tsv.train.attributes[1].categories, (Strings{"p\tq", "x y"}));
  // The wrong delimiter leaves one column, and the message says which delimiter was used.
  const auto one = write("one.csv", "a;b;y\n1;2;0\n3;4;1,2\n");
  expect_input_error([&] { read_csv(one, "", {}, csv_dialect()); },
                     {"one.csv:3", "data.delimiter", "','"});
}

TEST_F(CsvTest, MissingValuesAreRefusedWithRowAndColumnOrDropped) {
  const auto file = write("m.csv", "a,b,c,y\n1,2,u,x\n3,NA,v,y\n4,5,?,x\n6,7,w,\n8,9,u,y\n");
  expect_input_error(
      [&] {
        read_csv(file, "", {"", {"c"}}, csv_dialect());
      },
      {"m.csv:3: column 'b' is missing a value ('NA')", "data.missing = \"drop\""});
  CsvOptions drop = csv_dialect("missing = \"drop\"\n");
  const auto data = read_csv(file, "", {"", {"c"}}, drop);
  EXPECT_EQ(data.train.rows, 2u);  // lines 2 and 6; a missing label drops its row too
  EXPECT_EQ(data.train.numeric, (std::vector<double>{1, 2, 8, 9}));
  EXPECT_EQ(data.train.attributes[2].categories, (Strings{"u"}));
  // A column that is not read does not drop its rows.
  drop.drop = {"b", "c"};
  EXPECT_EQ(read_csv(file, "", {}, drop).train.rows, 4u);
  // Markers are the deck's: with none, "NA" is just text in a numeric column.
  const CsvOptions none = csv_dialect("missing_values = []\n");
  expect_input_error(
      [&] {
        read_csv(file, "", {"", {"c"}}, none);
      },
      {"m.csv:3: column 'b': 'NA' is not a number"});
  drop.drop.clear();
  const auto all_missing = write("all.csv", "a,y\nNA,1\n,0\n");
  expect_input_error([&] { read_csv(all_missing, "", {}, drop); },
                     {"all.csv", "every data row has a missing value"});
}

TEST_F(CsvTest, GzipCompressedCsvReadsAsThePlainFile) {
  const std::string text = "a,b,y\n1.5,x,0\n-2,z,1\n";
  const auto plain = write("p.csv", text);
  const gzFile gz = gzopen(path("p.csv.gz").c_str(), "wb");
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  const auto a = read_csv(plain, "", {"", {"b"}}, csv_dialect());
  const auto b = read_csv(path("p.csv.gz"), "", {"", {"b"}}, csv_dialect());
  EXPECT_EQ(b.train.numeric, a.train.numeric);
  EXPECT_EQ(b.train.categorical, a.train.categorical);
  EXPECT_EQ(b.train.label, a.train.label);
  // A damaged gzip stream is named.
  std::ifstream compressed(path("p.csv.gz"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(compressed)),
                          std::istreambuf_iterator<char>());
  write("cut.csv.gz", bytes.substr(0, bytes.size() - 6));
  expect_input_error([&] { read_csv(path("cut.csv.gz"), "", {}, csv_dialect()); },
                     {"cut.csv.gz", "cannot read data file"});
}

TEST_F(CsvTest, FeaturesAndDropChooseTheColumnsRead) {
  // "name" is text: only a column that is not read may hold it without data.categorical.
  const auto file = write("f.csv", "id,name,a,b,y\n1,ann,0.5,2,0\n2,bob,1.5,3,1\n");
  CsvOptions options = csv_dialect();
  options.drop = {"name", "id"};
  EXPECT_EQ(attribute_names(read_csv(file, "", {}, options).train), (Strings{"a", "b"}));
  options.drop.clear();
  options.features = {"b"};
  const auto data = read_csv(file, "", {}, options);
  EXPECT_EQ(attribute_names(data.train), (Strings{"b"}));
  EXPECT_EQ(data.train.numeric, (std::vector<double>{2, 3}));
  options.features = {"nope"};
  expect_input_error([&] { read_csv(file, "", {}, options); },
                     {"data.features lists column 'nope'", "f.csv", "id, name, a, b, y"});
  options.features.clear();
  options.drop = {"y"};
  expect_input_error([&] { read_csv(file, "", {}, options); },
                     {"data.drop lists column 'y', which is the label"});
  // The partition column is read (as categorical) whatever data.features says.
  options.drop.clear();
  options.features = {"a"};
  options.client = "name";
  const auto with_client = read_csv(file, "", {}, options);
  EXPECT_EQ(attribute_names(with_client.train), (Strings{"name", "a"}));
  EXPECT_EQ(with_client.train.attributes[0].kind, AttributeKind::categorical);
}

TEST(DataSelection, FeaturesAndDropApplyToEverySource) {
  // Synthetic: num0..num3, cat0, cat1.
  DataConfig config = DataConfig::from_deck(deck_of("[data.synthetic]\nrows = 200\n"));
  const TrainTest all = load_data(config, 3);
  config.features = {"cat1", "num2"};
  const TrainTest kept = load_data(config, 3);
  EXPECT_EQ(attribute_names(kept.train), (Strings{"num2", "cat1"}));  // source order
  EXPECT_EQ(kept.train.attributes[1].column, 0);
  for (std::size_t r = 0; r < kept.train.rows; ++r) {
    EXPECT_EQ(kept.train.numeric[r], all.train.numeric[r * 4 + 2]);
    EXPECT_EQ(kept.train.categorical[r], all.train.categorical[r * 2 + 1]);
  }
  config.features.clear();
  config.drop = {"num0", "cat0"};
  const TrainTest dropped = load_data(config, 3);
  EXPECT_EQ(attribute_names(dropped.train), (Strings{"num1", "num2", "num3", "cat1"}));
  EXPECT_EQ(dropped.test.categorical_count(), 1);
  config.drop = {"cat9"};
  expect_input_error([&] { load_data(config, 3); },
                     {"data.drop lists 'cat9', which is not an attribute", "num0, num1"});
}

TEST_F(CsvTest, LabelsThatAreNotClassesAreRefused) {
  DataConfig config = default_data();
  config.source = "csv";
  config.path = write("price.csv", "a,price\n1,0.5\n2,1.25\n3,2\n4,0.5\n");
  expect_input_error([&] { load_data(config, 1); },
                     {"price.csv", "label column 'price' holds 3 distinct numbers",
                      "2 of them not integers (e.g. '0.5')", "data.label"});
  std::string many = "a,id\n";
  for (int r = 0; r <= kMaxClasses; ++r) many += fmt::format("{},user{}\n", r, r);
  config.path = write("ids.csv", many);
  expect_input_error([&] { load_data(config, 1); },
                     {"the label 'id' has 1001 distinct values", "at most 1000"});
  config.path = write("one.csv", "a,y\n1,x\n2,x\n3,x\n4,x\n5,x\n");
  expect_input_error([&] { load_data(config, 1); }, {"a single class ('x')"});
}

TEST_F(CsvTest, DataPathsAreTakenFromTheDeckFilesDirectory) {
  write("decks/data/t.csv", "a,y\n1,0\n2,1\n");
  const auto deck_file = write("decks/run.toml",
                               "[data]\nsource = \"csv\"\npath = \"data/t.csv\"\n"
                               "test_path = \"/abs/test.csv\"\n");
  const DataConfig config = DataConfig::from_deck(Deck::from_file(deck_file, deck_schema()));
  EXPECT_EQ(config.path, path("decks/data/t.csv"));
  EXPECT_EQ(config.test_path, "/abs/test.csv");  // absolute paths stay
  // --set speaks for the command line: its relative paths are the working directory's.
  const Deck overridden = Deck::from_file(deck_file, deck_schema(), {"data.path=\"mine.csv\""});
  EXPECT_EQ(DataConfig::from_deck(overridden).path, "mine.csv");
}

TEST(DataConfigKeys, SourceSpecificKeysAreRefusedForOtherSources) {
  expect_input_error(
      [] {
        DataConfig::from_deck(
            deck_of("[data]\nsource = \"csv\"\npath = \"a\"\ndelimiter = \";;\"\n"));
      },
      {"deck.toml:4", "data.delimiter = \";;\"", "one character"});
  expect_input_error(
      [] {
        DataConfig::from_deck(
            deck_of("[data]\nsource = \"idx\"\npath = \"a\"\nmissing = \"drop\"\n"));
      },
      {"deck.toml:4", "data.missing applies only to data.source = \"csv\""});
  expect_input_error(
      [] {
        DataConfig::from_deck(
            deck_of("[data]\nsource = \"csv\"\npath = \"a\"\n[data.arrays]\nclients = \"c\"\n"));
      },
      {"deck.toml:5", "data.arrays.clients applies only to data.source = \"hdf5\", \"npy\""});
  expect_input_error(
      [] {
        DataConfig::from_deck(deck_of(
            "[data]\nsource = \"npy\"\npath = \"a\"\n[data.arrays]\nnames_attribute = \"n\"\n"));
      },
      {"data.arrays.names_attribute applies only to data.source = \"hdf5\""});
  expect_input_error(
      [] {
        DataConfig::from_deck(deck_of(
            "[data]\nsource = \"hdf5\"\npath = \"a\"\n[data.arrays]\ntest_features = \"t\"\n"));
      },
      {"data.arrays.test_features and data.arrays.test_labels go together"});
  expect_input_error(
      [] { DataConfig::from_deck(deck_of("[data]\nfeatures = [\"num0\"]\ndrop = [\"num1\"]\n")); },
      {"deck.toml:3", "data.features", "data.drop", "not both"});
  expect_input_error(
      [] {
        DataConfig::from_deck(deck_of("[data]\nsource = \"tff\"\npath = \"a\"\nlabel = \"y\"\n"));
      },
      {"data.label applies only to data.source = \"csv\", \"arff\"", "data.arrays"});
}

}  // namespace
}  // namespace fluence
