// Tests for the CSV, ARFF and IDX readers: exact parsed values on small fixture files, every input
// error naming its file, line and column, and the real Debian data sets when they are installed.
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/error.hpp"
#include "fluence/data/loaders.hpp"
#include "fluence/data/source.hpp"
#include "support/default_deck.hpp"
#include "support/scratch_files.hpp"

namespace fluence {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

using Strings = std::vector<std::string>;

using LoadersTest = testing::ScratchDirectoryTest;
using testing::expect_input_error;

Strings attribute_names(const Table& table) {
  Strings names;
  for (const auto& attribute : table.attributes) names.push_back(attribute.name);
  return names;
}

// ---------------------------------------------------------------------------------------------
// CSV

// read_csv in the declared default dialect (data.delimiter, data.missing, data.missing_values;
// tests/data/test_csv_options.cpp varies it).
TrainTest read_default_csv(const std::string& train_path, const std::string& test_path,
                           const ColumnSelection& columns) {
  return read_csv(train_path, test_path, columns, default_data().csv);
}

TEST_F(LoadersTest, CsvReadsNumericCategoricalAndLabelColumns) {
  const auto file = write("people.csv",
                          "age,color,income,label\n"
                          "30,red,1.5,yes\n"
                          " 41 , blue ,2.25,no\n"
                          "\n"
                          "25,red,-3e2,yes\n");
  const auto data = read_default_csv(file, "", {"", {"color"}});
  const Table& train = data.train;
  EXPECT_EQ(train.rows, 3u);
  EXPECT_EQ(attribute_names(train), (Strings{"age", "color", "income"}));
  EXPECT_EQ(train.attributes[0].kind, AttributeKind::numeric);
  EXPECT_EQ(train.attributes[0].column, 0);
  EXPECT_EQ(train.attributes[1].kind, AttributeKind::categorical);
  EXPECT_EQ(train.attributes[1].column, 0);
  EXPECT_EQ(train.attributes[1].categories, (Strings{"blue", "red"}));
  EXPECT_EQ(train.attributes[2].kind, AttributeKind::numeric);
  EXPECT_EQ(train.attributes[2].column, 1);
  EXPECT_EQ(train.numeric, (std::vector<double>{30, 1.5, 41, 2.25, 25, -300}));
  EXPECT_EQ(train.categorical, (std::vector<std::int32_t>{1, 0, 1}));
  EXPECT_EQ(train.label_name, "label");
  EXPECT_EQ(train.class_names, (Strings{"no", "yes"}));
  EXPECT_EQ(train.label, (std::vector<std::int32_t>{1, 0, 1}));
}

TEST_F(LoadersTest, CsvWithoutTestFileGivesEmptyTestTableWithTheSchema) {
  const auto file = write("a.csv", "x,y\n1,a\n2,b\n");
  const auto data = read_default_csv(file, "", {});
  EXPECT_EQ(data.test.rows, 0u);
  EXPECT_TRUE(data.test.numeric.empty());
  EXPECT_TRUE(data.test.label.empty());
  EXPECT_EQ(attribute_names(data.test), (Strings{"x"}));
  EXPECT_EQ(data.test.label_name, "y");
  EXPECT_EQ(data.test.class_names, (Strings{"a", "b"}));
}

TEST_F(LoadersTest, CsvHandlesQuotesEscapesAndCrLf) {
  const auto file = write("quoted.csv",
                          "\"name, full\",score,\"say \"\"hi\"\"\",cls\r\n"
                          "\"Smith, J\", 1 ,  \"a \"\"b\"\"\" ,2\r\n"
                          "Doe,2,plain,10\r\n");
  const auto data = read_default_csv(file, "", {"", {"name, full", "say \"hi\""}});
  const Table& train = data.train;
  EXPECT_EQ(attribute_names(train), (Strings{"name, full", "score", "say \"hi\""}));
  EXPECT_EQ(train.attributes[0].categories, (Strings{"Doe", "Smith, J"}));
  EXPECT_EQ(train.attributes[2].categories, (Strings{"a \"b\"", "plain"}));
  EXPECT_EQ(train.attributes[2].column, 1);
  EXPECT_EQ(train.numeric, (std::vector<double>{1, 2}));
  EXPECT_EQ(train.categorical, (std::vector<std::int32_t>{1, 0, 0, 1}));
  EXPECT_EQ(train.class_names, (Strings{"2", "10"}));  // numeric order, not "10" < "2"
  EXPECT_EQ(train.label, (std::vector<std::int32_t>{0, 1}));
}

TEST_F(LoadersTest, CsvLabelByIndexOrByName) {
  const auto file = write("l.csv", "a,b,c\n1,x,5\n2,y,6\n");
  const auto by_index = read_default_csv(file, "", {"1", {}});
  EXPECT_EQ(by_index.train.label_name, "b");
  EXPECT_EQ(by_index.train.class_names, (Strings{"x", "y"}));
  EXPECT_EQ(by_index.train.numeric, (std::vector<double>{1, 5, 2, 6}));
  const auto by_name = read_default_csv(file, "", {"a", {"b"}});
  EXPECT_EQ(by_name.train.label_name, "a");
  EXPECT_EQ(attribute_names(by_name.train), (Strings{"b", "c"}));
  EXPECT_EQ(by_name.train.class_names, (Strings{"1", "2"}));
  EXPECT_EQ(by_name.train.attributes[0].kind, AttributeKind::categorical);
  EXPECT_EQ(by_name.train.numeric, (std::vector<double>{5, 6}));
}

TEST_F(LoadersTest, CsvColumnNamedLikeAnIndexIsMatchedByName) {
  const auto file = write("n.csv", "x,3,y\n1,p,q\n2,r,s\n");
  const auto data = read_default_csv(file, "", {"3", {"y"}});
  EXPECT_EQ(data.train.label_name, "3");
  EXPECT_EQ(data.train.class_names, (Strings{"p", "r"}));
}

TEST_F(LoadersTest, CsvCategoriesComeFromTrainAndTestTogether) {
  const auto train_file = write("train.csv", "v,kind,y\n1,b,2\n2,a,10\n");
  const auto test_file = write("test.csv", "v,kind,y\n3,c,9\n");
  const auto data = read_default_csv(train_file, test_file, {"y", {"kind"}});
  EXPECT_EQ(data.train.class_names, (Strings{"2", "9", "10"}));
  EXPECT_EQ(data.test.class_names, data.train.class_names);
  EXPECT_EQ(data.train.attributes[1].categories, (Strings{"a", "b", "c"}));
  EXPECT_EQ(data.test.attributes[1].categories, (Strings{"a", "b", "c"}));
  EXPECT_EQ(data.train.label, (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(data.train.categorical, (std::vector<std::int32_t>{1, 0}));
  EXPECT_EQ(data.test.rows, 1u);
  EXPECT_EQ(data.test.numeric, (std::vector<double>{3}));
  EXPECT_EQ(data.test.categorical, (std::vector<std::int32_t>{2}));
  EXPECT_EQ(data.test.label, (std::vector<std::int32_t>{1}));
}

// Issue 41: numerically equal numeric labels ("1", "1.0", "01", "1e0", in the training and the
// test file) were a class each; they are one class, named by the shortest spelling. A categorical
// attribute keeps its values as written.
TEST_F(LoadersTest, CsvNumericallyEqualLabelsAreOneClass) {
  const auto train_file =
      write("eq_train.csv", "v,c,y\n1,1,1.0\n2,1.0,2\n3,2,01\n4,2,10\n5,1,2.00\n6,1,1\n");
  const auto test_file = write("eq_test.csv", "v,c,y\n7,1,1e0\n8,2,10.0\n9,1,2\n");
  const auto data = read_default_csv(train_file, test_file, {"y", {"c"}});
  EXPECT_EQ(data.train.class_names, (Strings{"1", "2", "10"}));
  EXPECT_EQ(data.test.class_names, data.train.class_names);
  EXPECT_EQ(data.train.label, (std::vector<std::int32_t>{0, 1, 0, 2, 1, 0}));
  EXPECT_EQ(data.test.label, (std::vector<std::int32_t>{0, 2, 1}));
  EXPECT_EQ(data.train.attributes[1].categories, (Strings{"1", "1.0", "2"}));
}

TEST_F(LoadersTest, CsvSortsMixedCategoriesLexicographically) {
  const auto file = write("m.csv", "v,y\n1,b\n2,10\n3,9\n");
  EXPECT_EQ(read_default_csv(file, "", {}).train.class_names, (Strings{"10", "9", "b"}));
}

TEST_F(LoadersTest, CsvMissingFileIsAnError) {
  const auto missing = path("absent.csv");
  expect_input_error([&] { read_default_csv(missing, "", {}); },
                     {fmt::format("cannot read data file '{}'", missing)});
  const auto file = write("ok.csv", "a,b\n1,2\n");
  expect_input_error([&] { read_default_csv(file, missing, {}); },
                     {"cannot read data file", missing});
  expect_input_error([&] { read_default_csv(directory_.string(), "", {}); },
                     {"cannot read data file", directory_.string()});
}

TEST_F(LoadersTest, CsvRaggedRowNamesFileAndLine) {
  const auto file = write("ragged.csv", "a,b,c\n1,2,3\n4,5\n");
  expect_input_error([&] { read_default_csv(file, "", {}); },
                     {fmt::format("{}:3: row has 2 fields, the header has 3", file)});
  const auto test_file = write("ragged_test.csv", "a,b,c\n\n1,2,3,4\n");
  const auto train_file = write("fine.csv", "a,b,c\n1,2,3\n");
  expect_input_error([&] { read_default_csv(train_file, test_file, {}); },
                     {fmt::format("{}:3: row has 4 fields, the header has 3", test_file)});
}

TEST_F(LoadersTest, CsvLabelIndexOutOfRange) {
  const auto file = write("five.csv", "a,b,c,d,e\n1,2,3,4,5\n");
  expect_input_error(
      [&] {
        read_default_csv(file, "", {"7", {}});
      },
      {fmt::format("label column 7 is out of range: {} has 5 columns (0..4)", file)});
}

TEST_F(LoadersTest, CsvUnknownLabelOrCategoricalName) {
  const auto file = write("cols.csv", "age,color,y\n1,red,a\n");
  expect_input_error(
      [&] {
        read_default_csv(file, "", {"nope", {}});
      },
      {"label column 'nope'", file, "age, color, y"});
  expect_input_error(
      [&] {
        read_default_csv(file, "", {"", {"colour"}});
      },
      {"data.categorical", "'colour'", file, "age, color, y"});
}

TEST_F(LoadersTest, CsvNonNumericValueNamesFileLineAndColumn) {
  const auto file = write("bad.csv", "age,color,y\n1,red,a\n\nabc,blue,b\n");
  expect_input_error(
      [&] {
        read_default_csv(file, "", {"", {"color"}});
      },
      {fmt::format("{}:4: column 'age': 'abc' is not a number; list the column in "
                   "data.categorical to treat it as categorical",
                   file)});
  // Categorical values were not listed, so "red" is a number error too.
  expect_input_error([&] { read_default_csv(file, "", {}); },
                     {file + ":2:", "column 'color'", "'red'"});
  const auto train_file = write("good.csv", "age,color,y\n1,red,a\n");
  const auto test_file = write("bad_test.csv", "age,color,y\n2,red,a\n1e400,red,b\n");
  expect_input_error(
      [&] {
        read_default_csv(train_file, test_file, {"", {"color"}});
      },
      {test_file + ":3:", "column 'age'", "'1e400'"});
}

// Issue 24, message hygiene: a 20 MB field is quoted by its first 60 bytes and its length, a
// control byte escaped, and a NUL byte (which ended the message where it stood) refuses the file
// with its line, the NUL shown.
TEST_F(LoadersTest, CsvFieldsAreQuotedShortAndEscaped) {
  const std::string huge(20'000'000, '7');
  const auto long_file = write("long.csv", "a,b,y\n1,2,x\n3," + huge + "z,y\n");
  try {
    read_default_csv(long_file, "", {});
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_LT(message.size(), 400u) << message.substr(0, 400);
    EXPECT_NE(message.find("column 'b': '" + huge.substr(0, 60) + "... (20000001 bytes)'"),
              std::string::npos)
        << message;
  }
  const auto control = write("control.csv", "a,b,y\n1,2,x\n3,4\x01\x1b[2J,y\n");
  expect_input_error([&] { read_default_csv(control, "", {}); },
                     {control + ":3: column 'b': '4\\x01\\x1b[2J' is not a number"});
  const auto nul = write("nul.csv", "a,b,y\n1,2,x\n3,a\0bc,y\n"s);
  expect_input_error([&] { read_default_csv(nul, "", {}); },
                     {nul + ":3: a NUL byte at character 4 of the line '3,a\\x00bc,y'",
                      "a data file must be text"});
  const auto arff = write("nul.arff", "@relation r\n@attribute a {x\0, y}\n"s);
  expect_input_error([&] { read_arff(arff, "", {}); }, {arff + ":2: a NUL byte"});
}

// The readers stream a file a line at a time (issue 25), but a NUL byte anywhere in a file is
// still what they report, before a problem on an earlier line (the file is not text at all), as
// when they checked the whole text first; the first pass of distributed ownership too.
TEST_F(LoadersTest, NulByteIsReportedBeforeAnEarlierProblem) {
  const auto csv = write("late_nul.csv", "a,b,y\n1,2\n3,4,x\n5,\0,y\n"s);
  for (const bool index : {false, true})
    expect_input_error(
        [&] {
          const CsvOptions options = default_data().csv;
          index ? index_csv(csv, "", {}, options) : read_csv(csv, "", {}, options);
        },
        {csv + ":4: a NUL byte at character 3"});
  const auto arff = write(
      "late_nul.arff", "@relation r\n@attribute a numeric\n@attribute y {x}\n@data\n1,z\n2,\0\n"s);
  for (const bool index : {false, true})
    expect_input_error([&] { index ? index_arff(arff, "", {}) : read_arff(arff, "", {}); },
                       {arff + ":6: a NUL byte at character 3"});
}

TEST_F(LoadersTest, CsvEmptyFileOrHeaderOnlyIsAnError) {
  const auto empty = write("empty.csv", "");
  expect_input_error([&] { read_default_csv(empty, "", {}); }, {empty, "empty"});
  const auto blank = write("blank.csv", "\n  \n\n");
  expect_input_error([&] { read_default_csv(blank, "", {}); }, {blank, "empty"});
  const auto header_only = write("header.csv", "a,b\n\n");
  expect_input_error([&] { read_default_csv(header_only, "", {}); }, {header_only, "no data rows"});
}

TEST_F(LoadersTest, CsvTestFileMustHaveTheSameHeader) {
  const auto train_file = write("train.csv", "a,b,c\n1,2,3\n");
  const auto renamed = write("renamed.csv", "a,x,c\n1,2,3\n");
  expect_input_error([&] { read_default_csv(train_file, renamed, {}); },
                     {train_file, renamed, "'x'", "'b'"});
  const auto narrower = write("narrower.csv", "a,b\n1,2\n");
  expect_input_error([&] { read_default_csv(train_file, narrower, {}); }, {train_file, narrower});
}

TEST_F(LoadersTest, CsvMalformedQuotesAndDuplicateColumns) {
  const auto open_quote = write("open.csv", "a,b\n1,\"2\n");
  expect_input_error([&] { read_default_csv(open_quote, "", {}); }, {open_quote + ":2:", "quote"});
  const auto trailing = write("trailing.csv", "a,b\n1,\"2\"x\n");
  expect_input_error([&] { read_default_csv(trailing, "", {}); }, {trailing + ":2:", "quote"});
  const auto twice = write("twice.csv", "a,b,a\n1,2,3\n");
  expect_input_error([&] { read_default_csv(twice, "", {}); }, {twice + ":1:", "'a'", "twice"});
}

// ---------------------------------------------------------------------------------------------
// ARFF

constexpr const char* kToyArff =
    "% A comment before the relation\n"
    "@RELATION 'toy data'\n"
    "\n"
    "@attribute age NUMERIC\n"
    "@Attribute 'home town' {'New York', Paris , \"St. Louis\", 'O\\'Hare'}\n"
    "@attribute score real % a trailing comment\n"
    "@attribute count Integer\n"
    "@ATTRIBUTE class {b, a}\n"
    "\n"
    "@DATA\n"
    "% a comment among the rows\n"
    "30,'New York',1.5,2,a\n"
    "41, Paris ,2.25,3,b\r\n"
    "\n"
    "25,\"St. Louis\",-3e2,4,a  % trailing comment\n"
    "7,'O\\'Hare',0,0,b\n";

TEST_F(LoadersTest, ArffReadsNumericAndNominalInDeclaredOrder) {
  const auto data = read_arff(write("toy.arff", kToyArff), "", {});
  const Table& train = data.train;
  EXPECT_EQ(train.rows, 4u);
  EXPECT_EQ(attribute_names(train), (Strings{"age", "home town", "score", "count"}));
  EXPECT_EQ(train.attributes[0].kind, AttributeKind::numeric);
  EXPECT_EQ(train.attributes[0].column, 0);
  EXPECT_EQ(train.attributes[1].kind, AttributeKind::categorical);
  EXPECT_EQ(train.attributes[1].column, 0);
  EXPECT_EQ(train.attributes[1].categories, (Strings{"New York", "Paris", "St. Louis", "O'Hare"}));
  EXPECT_EQ(train.attributes[2].column, 1);
  EXPECT_EQ(train.attributes[3].column, 2);
  EXPECT_EQ(train.numeric, (std::vector<double>{30, 1.5, 2, 41, 2.25, 3, 25, -300, 4, 7, 0, 0}));
  EXPECT_EQ(train.categorical, (std::vector<std::int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(train.label_name, "class");
  EXPECT_EQ(train.class_names, (Strings{"b", "a"}));  // declared order, not sorted
  EXPECT_EQ(train.label, (std::vector<std::int32_t>{1, 0, 1, 0}));
  EXPECT_EQ(data.test.rows, 0u);
  EXPECT_EQ(attribute_names(data.test), attribute_names(train));
  EXPECT_EQ(data.test.class_names, train.class_names);
}

TEST_F(LoadersTest, ArffLabelByNameOrIndexMustBeNominal) {
  const auto file = write("toy.arff", kToyArff);
  const auto by_name = read_arff(file, "", {"home town", {}});
  EXPECT_EQ(by_name.train.label_name, "home town");
  EXPECT_EQ(by_name.train.label, (std::vector<std::int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(attribute_names(by_name.train), (Strings{"age", "score", "count", "class"}));
  EXPECT_EQ(by_name.train.attributes[3].categories, (Strings{"b", "a"}));
  EXPECT_EQ(by_name.train.categorical, (std::vector<std::int32_t>{1, 0, 1, 0}));
  EXPECT_EQ(read_arff(file, "", {"1", {}}).train.label_name, "home town");
  expect_input_error([&] { read_arff(file, "", {"0", {}}); }, {"'age'", file, "numeric"});
  expect_input_error([&] { read_arff(file, "", {"nope", {}}); }, {"'nope'", file});
  expect_input_error(
      [&] {
        read_arff(file, "", {"9", {}});
      },
      {fmt::format("label column 9 is out of range: {} has 5 columns (0..4)", file)});
}

constexpr const char* kMissingArff =
    "@relation m\n"
    "@attribute color {red, green}\n"
    "@attribute x numeric\n"
    "@attribute class {yes, no}\n"
    "@data\n"
    "red,1,yes\n"
    "?,2,?\n"
    "green,3,no\n"
    "?,4,yes\n";

TEST_F(LoadersTest, ArffMissingNominalValueBecomesItsOwnCategory) {
  const auto data = read_arff(write("m.arff", kMissingArff), "", {});
  EXPECT_EQ(data.train.attributes[0].categories, (Strings{"red", "green", "?"}));
  EXPECT_EQ(data.train.categorical, (std::vector<std::int32_t>{0, 2, 1, 2}));
  EXPECT_EQ(data.train.class_names, (Strings{"yes", "no", "?"}));
  EXPECT_EQ(data.train.label, (std::vector<std::int32_t>{0, 2, 1, 0}));
}

TEST_F(LoadersTest, ArffTestFileSharesCategoriesWithTraining) {
  const auto train_file = write("train.arff",
                                "@relation t\n@attribute color {red, green}\n"
                                "@attribute class {yes, no}\n@data\nred,yes\n");
  const auto test_file = write("test.arff",
                               "@relation other name\n@attribute color {red, green}\n"
                               "@attribute class {yes, no}\n@data\n?,no\ngreen,yes\n");
  const auto data = read_arff(train_file, test_file, {});
  EXPECT_EQ(data.train.attributes[0].categories, (Strings{"red", "green", "?"}));
  EXPECT_EQ(data.test.attributes[0].categories, (Strings{"red", "green", "?"}));
  EXPECT_EQ(data.train.categorical, (std::vector<std::int32_t>{0}));
  EXPECT_EQ(data.test.rows, 2u);
  EXPECT_EQ(data.test.categorical, (std::vector<std::int32_t>{2, 1}));
  EXPECT_EQ(data.test.label, (std::vector<std::int32_t>{1, 0}));
}

TEST_F(LoadersTest, ArffTestFileMustDeclareTheSameAttributes) {
  const auto train_file = write("train.arff",
                                "@relation t\n@attribute color {red, green}\n"
                                "@attribute class {yes, no}\n@data\nred,yes\n");
  const auto reordered = write("reordered.arff",
                               "@relation t\n@attribute color {green, red}\n"
                               "@attribute class {yes, no}\n@data\nred,yes\n");
  expect_input_error([&] { read_arff(train_file, reordered, {}); },
                     {train_file, reordered, "'color'"});
  const auto fewer = write("fewer.arff", "@relation t\n@attribute class {yes, no}\n@data\nyes\n");
  expect_input_error([&] { read_arff(train_file, fewer, {}); }, {train_file, fewer});
}

TEST_F(LoadersTest, ArffMissingNumericValueIsAnError) {
  const auto file = write("m.arff",
                          "@relation m\n@attribute x numeric\n@attribute c {a}\n"
                          "@data\n1,a\n?,a\n");
  expect_input_error([&] { read_arff(file, "", {}); }, {file + ":6:", "column 'x'", "'?'"});
  const auto text = write("t.arff",
                          "@relation m\n@attribute x numeric\n@attribute c {a}\n"
                          "@data\n1,a\n\n1x,a\n");
  expect_input_error([&] { read_arff(text, "", {}); }, {text + ":7:", "column 'x'", "'1x'"});
}

TEST_F(LoadersTest, ArffUndeclaredNominalValueNamesFileLineAndColumn) {
  const auto file = write("u.arff", kMissingArff + std::string("purple,5,yes\n"));
  expect_input_error([&] { read_arff(file, "", {}); },
                     {file + ":10:", "column 'color'", "'purple'", "red, green"});
  const auto label = write("l.arff", kMissingArff + std::string("red,5,maybe\n"));
  expect_input_error([&] { read_arff(label, "", {}); }, {label + ":10:", "'class'", "'maybe'"});
}

TEST_F(LoadersTest, ArffRejectsSparseRowsAndStringOrDateAttributes) {
  const auto sparse = write("s.arff",
                            "@relation s\n@attribute x numeric\n@attribute c {a, b}\n"
                            "@data\n{0 1, 1 b}\n");
  expect_input_error([&] { read_arff(sparse, "", {}); }, {sparse + ":5:", "sparse"});
  const auto string_type = write("str.arff",
                                 "@relation s\n@attribute text string\n"
                                 "@attribute c {a}\n@data\n'hi',a\n");
  expect_input_error([&] { read_arff(string_type, "", {}); },
                     {string_type + ":2:", "'text'", "string"});
  const auto date_type = write("date.arff",
                               "@relation s\n@attribute 'when' DATE \"yyyy-MM-dd\"\n"
                               "@attribute c {a}\n@data\n2020-01-01,a\n");
  expect_input_error([&] { read_arff(date_type, "", {}); }, {date_type + ":2:", "'when'", "date"});
  const auto unknown = write("unk.arff", "@relation s\n@attribute x decimal\n@data\n1\n");
  expect_input_error([&] { read_arff(unknown, "", {}); }, {unknown + ":2:", "'x'", "decimal"});
}

TEST_F(LoadersTest, ArffStructuralErrors) {
  const auto count = write("count.arff",
                           "@relation s\n@attribute x numeric\n@attribute c {a}\n"
                           "@data\n1,a\n2\n");
  expect_input_error([&] { read_arff(count, "", {}); },
                     {count + ":6:", "row has 1 values, the header declares 2 attributes"});
  const auto no_data = write("nodata.arff", "@relation s\n@attribute c {a}\n");
  expect_input_error([&] { read_arff(no_data, "", {}); }, {no_data, "@data"});
  const auto no_rows = write("norows.arff", "@relation s\n@attribute c {a}\n@data\n% none\n");
  expect_input_error([&] { read_arff(no_rows, "", {}); }, {no_rows, "no rows"});
  const auto stray = write("stray.arff", "@relation s\nhello\n@data\n");
  expect_input_error([&] { read_arff(stray, "", {}); }, {stray + ":2:", "'hello'"});
  const auto twice = write("twice.arff", "@relation s\n@attribute c {a}\n@attribute c {b}\n");
  expect_input_error([&] { read_arff(twice, "", {}); }, {twice + ":3:", "'c'", "twice"});
  const auto open = write("open.arff", "@relation s\n@attribute c {a, 'b}\n@data\na\n");
  expect_input_error([&] { read_arff(open, "", {}); }, {open + ":2:", "quote"});
  const auto missing = path("absent.arff");
  expect_input_error([&] { read_arff(missing, "", {}); },
                     {fmt::format("cannot read data file '{}'", missing)});
}

// ---------------------------------------------------------------------------------------------
// IDX

// Writes an IDX file: magic 0x0000 08 NN, NN big-endian dimensions, then the bytes.
void write_idx(const std::string& file, const std::vector<std::uint32_t>& dimensions,
               const std::vector<unsigned char>& values, bool gzip) {
  std::string bytes = {0, 0, 8, static_cast<char>(dimensions.size())};
  for (const auto d : dimensions)
    for (int shift = 24; shift >= 0; shift -= 8) bytes += static_cast<char>((d >> shift) & 0xff);
  bytes.append(values.begin(), values.end());
  if (!gzip) {
    std::ofstream(file, std::ios::binary) << bytes;
    return;
  }
  gzFile out = gzopen(file.c_str(), "wb");
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(out);
}

class IdxTest : public LoadersTest {
 protected:
  // Three 2x2 training images and one test image; files mix plain and gzip on purpose.
  void write_valid_set() {
    write_idx(path("train-images-idx3-ubyte"), {3, 2, 2}, train_pixels_, false);
    write_idx(path("train-labels-idx1-ubyte.gz"), {3}, {0, 3, 1}, true);
    write_idx(path("t10k-images-idx3-ubyte.gz"), {1, 2, 2}, {255, 0, 128, 1}, true);
    write_idx(path("t10k-labels-idx1-ubyte"), {1}, {2}, false);
  }

  std::vector<unsigned char> train_pixels_ = {0, 255, 51, 102, 1, 2, 3, 4, 200, 100, 50, 25};
};

TEST_F(IdxTest, ReadsPlainAndGzipFiles) {
  write_valid_set();
  const auto data = read_idx(directory_.string());
  const Table& train = data.train;
  EXPECT_EQ(train.rows, 3u);
  EXPECT_EQ(attribute_names(train), (Strings{"px0", "px1", "px2", "px3"}));
  EXPECT_EQ(train.attributes[3].column, 3);
  EXPECT_EQ(train.categorical_count(), 0);
  ASSERT_EQ(train.numeric.size(), train_pixels_.size());
  for (std::size_t i = 0; i < train_pixels_.size(); ++i)
    EXPECT_EQ(train.numeric[i], train_pixels_[i] / 255.0) << "pixel " << i;
  EXPECT_EQ(train.label, (std::vector<std::int32_t>{0, 3, 1}));
  EXPECT_EQ(train.class_names, (Strings{"0", "1", "2", "3"}));
  EXPECT_EQ(data.test.rows, 1u);
  EXPECT_EQ(data.test.numeric, (std::vector<double>{1.0, 0.0, 128 / 255.0, 1 / 255.0}));
  EXPECT_EQ(data.test.label, (std::vector<std::int32_t>{2}));
  EXPECT_EQ(data.test.class_names, train.class_names);
  EXPECT_EQ(attribute_names(data.test), attribute_names(train));
}

// Distributed ownership's passes (issue 41): the index pass reads labels and headers only, a
// rank's pass the pixels of its rows; both against the whole read.
TEST_F(IdxTest, PassesReadTheLabelsThenTheRequestedRowsOnly) {
  write_valid_set();
  const auto whole = read_idx(directory_.string());
  const RowRequest none;
  const auto index = read_idx(directory_.string(), &none);
  for (const auto [part, all] :
       {std::pair{&index.train, &whole.train}, std::pair{&index.test, &whole.test}}) {
    EXPECT_TRUE(part->partial);
    EXPECT_TRUE(part->held.empty());
    EXPECT_TRUE(part->numeric.empty());
    EXPECT_EQ(part->rows, all->rows);
    EXPECT_EQ(part->label, all->label);
    EXPECT_EQ(part->class_names, all->class_names);
    EXPECT_EQ(part->image_shape, all->image_shape);
    EXPECT_EQ(part->byte_denominator, all->byte_denominator);
  }
  RowRequest some;
  some.train = {0, 2};
  some.test = {0};
  const auto rows = read_idx(directory_.string(), &some);
  EXPECT_EQ(rows.train.held, some.train);
  EXPECT_EQ(rows.test.held, some.test);
  const std::size_t pixels = 4;
  ASSERT_EQ(rows.train.numeric.size(), 2 * pixels);
  for (std::size_t i = 0; i < some.train.size(); ++i)
    for (std::size_t p = 0; p < pixels; ++p)
      EXPECT_EQ(rows.train.numeric[i * pixels + p],
                whole.train.numeric[static_cast<std::size_t>(some.train[i]) * pixels + p]);
  EXPECT_EQ(rows.test.numeric, whole.test.numeric);
  // A file shorter than its header is refused by a rank's pass too, even one whose rows are all
  // before the end, naming the sizes.
  train_pixels_.pop_back();
  write_idx(path("train-images-idx3-ubyte"), {3, 2, 2}, train_pixels_, false);
  RowRequest first;
  first.train = {0};
  expect_input_error([&] { read_idx(directory_.string(), &first); },
                     {path("train-images-idx3-ubyte"), "12", "11"});
}

TEST_F(IdxTest, MissingFileIsNamed) {
  write_valid_set();
  fs::remove(path("t10k-labels-idx1-ubyte"));
  expect_input_error([&] { read_idx(directory_.string()); },
                     {"cannot read data file", path("t10k-labels-idx1-ubyte")});
  expect_input_error([&] { read_idx(path("nowhere")); }, {"train-images-idx3-ubyte"});
}

TEST_F(IdxTest, WrongMagicIsNamed) {
  write_valid_set();
  write_idx(path("train-labels-idx1-ubyte.gz"), {3, 1, 1}, {0, 3, 1}, true);  // images, not labels
  expect_input_error([&] { read_idx(directory_.string()); },
                     {path("train-labels-idx1-ubyte.gz"), "magic", "0x00000803", "0x00000801"});
}

TEST_F(IdxTest, CountMismatchNamesBothFiles) {
  write_valid_set();
  write_idx(path("train-labels-idx1-ubyte.gz"), {2}, {0, 3}, true);
  expect_input_error(
      [&] { read_idx(directory_.string()); },
      {path("train-images-idx3-ubyte"), path("train-labels-idx1-ubyte.gz"), "3", "2 labels"});
}

TEST_F(IdxTest, TruncatedDataIsNamed) {
  write_valid_set();
  train_pixels_.pop_back();
  write_idx(path("train-images-idx3-ubyte"), {3, 2, 2}, train_pixels_, false);
  expect_input_error([&] { read_idx(directory_.string()); },
                     {path("train-images-idx3-ubyte"), "12", "11"});
}

TEST_F(IdxTest, HeaderSizesThatWrapAroundOrExceedAnImageSideAreRefused) {
  // 2^31 x 2^31 x 4 = 2^64 wraps to 0 in 64 bits: with no data bytes the old check passed it.
  write_valid_set();
  write_idx(path("train-images-idx3-ubyte"), {1u << 31, 1u << 31, 4}, {}, false);
  expect_input_error([&] { read_idx(directory_.string()); },
                     {path("train-images-idx3-ubyte"), "multiply beyond 2^64"});
  // A consistent file whose image side does not fit the convolution geometry's int.
  write_idx(path("train-images-idx3-ubyte"), {1, 70000, 1}, std::vector<unsigned char>(70000, 7),
            false);
  expect_input_error([&] { read_idx(directory_.string()); },
                     {path("train-images-idx3-ubyte"), "image side 70000"});
}

TEST_F(IdxTest, CorruptGzipIsNamed) {
  write_valid_set();
  const auto file = path("t10k-images-idx3-ubyte.gz");
  fs::resize_file(file, fs::file_size(file) - 6);  // cut into the trailer
  expect_input_error([&] { read_idx(directory_.string()); }, {file});
}

// The images are inflated whole by libdeflate, one gzip member at a time: a file of several
// members (`cat a.gz b.gz`, which gunzip and zlib read as one) gives all its bytes, and one holding
// more than its header promises is refused with the count of what it holds.
TEST_F(IdxTest, GzipOfSeveralMembersIsReadWholeAndExtraBytesAreNamed) {
  write_valid_set();
  const auto whole = read_idx(directory_.string());
  const auto file = path("train-images-idx3-ubyte.gz");
  fs::remove(path("train-images-idx3-ubyte"));
  write_idx(file, {3, 2, 2}, {train_pixels_.begin(), train_pixels_.begin() + 5}, true);
  {
    gzFile rest = gzopen(file.c_str(), "ab");  // appends a second member
    ASSERT_NE(rest, nullptr);
    ASSERT_EQ(gzwrite(rest, train_pixels_.data() + 5, 7), 7);
    gzclose(rest);
  }
  const auto members = read_idx(directory_.string());
  EXPECT_EQ(members.train.numeric, whole.train.numeric);
  RowRequest some;
  some.train = {1};
  some.test = {0};
  EXPECT_EQ(
      read_idx(directory_.string(), &some).train.numeric,
      (std::vector<double>(whole.train.numeric.begin() + 4, whole.train.numeric.begin() + 8)));
  train_pixels_.push_back(9);
  write_idx(file, {3, 2, 2}, train_pixels_, true);
  expect_input_error([&] { read_idx(directory_.string()); },
                     {file, "promises 12 bytes of data but the file holds 13"});
}

TEST_F(IdxTest, TestImageSizeMustMatchTraining) {
  write_valid_set();
  write_idx(path("t10k-images-idx3-ubyte.gz"), {1, 1, 4}, {1, 2, 3, 4}, true);
  expect_input_error(
      [&] { read_idx(directory_.string()); },
      {path("t10k-images-idx3-ubyte.gz"), path("train-images-idx3-ubyte"), "1x4", "2x2"});
}

// ---------------------------------------------------------------------------------------------
// The "ink" attribute (data.ink_levels): equal-frequency levels of a row's mean numeric value.

// A numeric-only table (like an IDX one) with two columns per row, both equal to the row's value,
// so a row's mean is its value.
Table two_column_table(const std::vector<double>& values) {
  Table table;
  table.attributes = {{"px0", AttributeKind::numeric, {}, 0},
                      {"px1", AttributeKind::numeric, {}, 1}};
  table.class_names = {"0", "1"};
  for (double v : values) {
    const double row[2] = {v, v};
    table.append_row(row, nullptr, 0);
  }
  return table;
}

std::vector<std::int32_t> ink_levels_of(const Table& table) {
  const int column = table.attributes[table.find_attribute("ink")].column;
  const int nc = table.categorical_count();
  std::vector<std::int32_t> levels;
  for (std::size_t r = 0; r < table.rows; ++r) levels.push_back(table.categorical[r * nc + column]);
  return levels;
}

TEST(InkAttribute, NamesLevelsAndBalancesTrainingRows) {
  // 12 distinct means in scrambled order: row r has mean (5 r) mod 12, a permutation of 0..11.
  std::vector<double> values;
  for (int r = 0; r < 12; ++r) values.push_back((5 * r) % 12);
  TrainTest data{two_column_table(values), two_column_table({2.5, 3.0, 9.5, -1.0, 100.0})};
  add_ink_attribute(data, 4);

  for (const Table* table : {&data.train, &data.test}) {
    EXPECT_EQ(attribute_names(*table), (Strings{"px0", "px1", "ink"}));
    const Attribute& ink = table->attributes.back();
    EXPECT_EQ(ink.kind, AttributeKind::categorical);
    EXPECT_EQ(ink.categories, (Strings{"q0", "q1", "q2", "q3"}));
    EXPECT_EQ(ink.column, 0);
    EXPECT_EQ(table->numeric_count(), 2);
    EXPECT_EQ(table->categorical.size(), table->rows);
  }
  // Brute force: a row's level is its mean's rank (0..11) divided by 3, so three rows per level.
  const auto train_levels = ink_levels_of(data.train);
  std::vector<int> counts(4, 0);
  for (int r = 0; r < 12; ++r) {
    const int rank = static_cast<int>(
        std::count_if(values.begin(), values.end(), [&](double v) { return v < values[r]; }));
    EXPECT_EQ(train_levels[r], rank / 3) << "row " << r;
    ++counts[train_levels[r]];
  }
  EXPECT_EQ(counts, (std::vector<int>{3, 3, 3, 3}));
  // Training thresholds are 3, 6, 9; a mean equal to a threshold takes the upper level.
  EXPECT_EQ(ink_levels_of(data.test), (std::vector<std::int32_t>{0, 1, 3, 0, 3}));
}

TEST(InkAttribute, UnevenRowCountGivesLevelsWithinOneOfEachOther) {
  std::vector<double> values;
  for (int r = 0; r < 10; ++r) values.push_back((3 * r) % 10 + 0.5);
  TrainTest data{two_column_table(values), two_column_table({0.0})};
  add_ink_attribute(data, 3);
  std::vector<int> counts(3, 0);
  for (auto level : ink_levels_of(data.train)) ++counts[level];
  // Level j holds the ranks floor(j n / L) .. floor((j + 1) n / L) - 1.
  for (int j = 0; j < 3; ++j) EXPECT_EQ(counts[j], (j + 1) * 10 / 3 - j * 10 / 3) << "level " << j;
}

TEST(InkAttribute, OneLevelPutsEveryRowInQ0) {
  TrainTest data{two_column_table({0.1, 0.9, 0.5}), two_column_table({2.0, -2.0})};
  add_ink_attribute(data, 1);
  EXPECT_EQ(data.train.attributes.back().categories, (Strings{"q0"}));
  EXPECT_EQ(ink_levels_of(data.train), (std::vector<std::int32_t>{0, 0, 0}));
  EXPECT_EQ(ink_levels_of(data.test), (std::vector<std::int32_t>{0, 0}));
}

TEST(InkAttribute, KeepsExistingCategoricalColumnsRowMajor) {
  Table train;
  train.attributes = {{"x", AttributeKind::numeric, {}, 0},
                      {"colour", AttributeKind::categorical, {"red", "blue"}, 0}};
  train.class_names = {"0", "1"};
  for (int r = 0; r < 4; ++r) {
    const double x = 3 - r;
    const std::int32_t colour = r % 2;
    train.append_row(&x, &colour, 0);
  }
  TrainTest data{train, train.empty_like()};
  add_ink_attribute(data, 2);
  EXPECT_EQ(data.train.attributes.back().column, 1);
  EXPECT_EQ(data.train.categorical, (std::vector<std::int32_t>{0, 1, 1, 1, 0, 0, 1, 0}));
  EXPECT_TRUE(data.test.categorical.empty());
  EXPECT_EQ(data.test.attributes.size(), 3u);
}

TEST_F(IdxTest, InkLevelsFromTheDeckAddTheAttributeToIdxData) {
  write_valid_set();
  const Deck deck = Deck::from_string(
      fmt::format("[data]\nsource = \"idx\"\npath = \"{}\"\nink_levels = 2\n", directory_.string()),
      "deck.toml", deck_schema());
  const DataConfig config = DataConfig::from_deck(deck);
  EXPECT_EQ(config.ink_levels, 2);
  const auto data = load_data(config, 1);
  // Mean pixel values (x 255): train 102, 2.5, 93.75; threshold = the median, 93.75; test 96.
  EXPECT_EQ(data.train.numeric_count(), 4);
  EXPECT_EQ(data.train.attributes.back().name, "ink");
  EXPECT_EQ(ink_levels_of(data.train), (std::vector<std::int32_t>{1, 0, 1}));
  EXPECT_EQ(ink_levels_of(data.test), (std::vector<std::int32_t>{1}));
}

// data.classes applies before the ink levels, so their thresholds come from the kept rows only.
TEST_F(IdxTest, ClassesFilterTrainAndTestBeforeTheInkLevels) {
  write_valid_set();
  const Deck deck = Deck::from_string(
      fmt::format("[data]\nsource = \"idx\"\npath = \"{}\"\nink_levels = 2\nclasses = [2, 0, 3]\n",
                  directory_.string()),
      "deck.toml", deck_schema());
  const auto data = load_data(DataConfig::from_deck(deck), 1);
  // Training labels 0, 3, 1: rows 0 and 1 are kept as classes 1 and 2; the test label 2 becomes 0.
  EXPECT_EQ(data.train.class_names, (Strings{"2", "0", "3"}));
  EXPECT_EQ(data.test.class_names, (Strings{"2", "0", "3"}));
  EXPECT_EQ(data.train.label, (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(data.test.label, (std::vector<std::int32_t>{0}));
  std::vector<double> kept_pixels;  // training images 0 and 1
  for (std::size_t i = 0; i < 8; ++i) kept_pixels.push_back(train_pixels_[i] / 255.0);
  EXPECT_EQ(data.train.numeric, kept_pixels);
  // Kept means (x 255): 102 and 2.5, so the threshold is 102 and the test image (96) is in q0;
  // with every row (means 102, 2.5, 93.75) it would be 93.75 and the test image in q1.
  EXPECT_EQ(ink_levels_of(data.train), (std::vector<std::int32_t>{1, 0}));
  EXPECT_EQ(ink_levels_of(data.test), (std::vector<std::int32_t>{0}));

  const Deck out_of_range =
      Deck::from_string(fmt::format("[data]\nsource = \"idx\"\npath = \"{}\"\nclasses = [1, 4]\n",
                                    directory_.string()),
                        "deck.toml", deck_schema());
  expect_input_error([&] { load_data(DataConfig::from_deck(out_of_range), 1); },
                     {"data.classes = [1, 4]", "[0, 4)", "4 is out of range"});
}

TEST(InkAttribute, DeckRejectsInkLevelsForOtherSources) {
  for (const std::string source : {"csv", "synthetic"}) {
    const Deck deck = Deck::from_string(
        fmt::format("[data]\nsource = \"{}\"\npath = \"x.csv\"\nink_levels = 3\n", source),
        "deck.toml", deck_schema());
    expect_input_error([&] { DataConfig::from_deck(deck); },
                       {"deck.toml:4", "data.ink_levels = 3", "data.source = \"idx\"", source});
  }
  const Deck none =
      Deck::from_string("[data]\nsource = \"synthetic\"\n", "deck.toml", deck_schema());
  EXPECT_EQ(DataConfig::from_deck(none).ink_levels, 0);
  EXPECT_THROW(Deck::from_string("[data]\nink_levels = -1\n", "deck.toml", deck_schema()),
               InputError);
}

// ---------------------------------------------------------------------------------------------
// Real data sets shipped by Debian packages (weka, the fashion-mnist data set), when installed.

TEST(DebianData, CreditGermanArff) {
  const std::string file = "/usr/share/doc/weka/examples/credit-g.arff";
  if (!fs::exists(file)) GTEST_SKIP() << file << " is not installed";
  const auto data = read_arff(file, "", {});
  const Table& train = data.train;
  EXPECT_EQ(train.rows, 1000u);
  EXPECT_EQ(train.attributes.size(), 20u);
  EXPECT_EQ(train.numeric_count(), 7);
  EXPECT_EQ(train.categorical_count(), 13);
  EXPECT_EQ(train.numeric.size(), 7000u);
  EXPECT_EQ(train.categorical.size(), 13000u);
  EXPECT_EQ(train.label_name, "class");
  EXPECT_EQ(train.class_names, (Strings{"good", "bad"}));
  const int personal_status = train.find_attribute("personal_status");
  ASSERT_GE(personal_status, 0);
  EXPECT_EQ(train.attributes[personal_status].categories.size(), 5u);
  // First row: '<0',6,... ,good
  EXPECT_EQ(train.attributes[0].categories[train.categorical[0]], "<0");
  EXPECT_EQ(train.numeric[0], 6.0);
  EXPECT_EQ(train.label[0], 0);
  EXPECT_EQ(data.test.rows, 0u);
}

TEST(DebianData, FashionMnistIdx) {
  const std::string directory = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(fs::path(directory) / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << directory << " is not installed";
  const auto data = read_idx(directory);
  EXPECT_EQ(data.train.rows, 60000u);
  EXPECT_EQ(data.test.rows, 10000u);
  EXPECT_EQ(data.train.numeric_count(), 784);
  EXPECT_EQ(data.train.attributes.back().name, "px783");
  EXPECT_EQ(data.train.classes(), 10);
  EXPECT_EQ(data.train.numeric.size(), 60000u * 784u);
  EXPECT_EQ(data.test.numeric.size(), 10000u * 784u);
  const auto [low, high] =
      std::minmax_element(data.train.numeric.begin(), data.train.numeric.end());
  EXPECT_EQ(*low, 0.0);
  EXPECT_EQ(*high, 1.0);
  const auto [low_label, high_label] =
      std::minmax_element(data.test.label.begin(), data.test.label.end());
  EXPECT_EQ(*low_label, 0);
  EXPECT_EQ(*high_label, 9);
}

// Every Weka example either loads or fails with an InputError (string attributes, numeric '?',
// numeric class): never a crash or another exception type.
TEST(DebianData, WekaExamplesLoadOrFailCleanly) {
  const fs::path directory = "/usr/share/doc/weka/examples";
  if (!fs::exists(directory)) GTEST_SKIP() << directory << " is not installed";
  for (const auto& entry : fs::directory_iterator(directory)) {
    if (entry.path().extension() != ".arff") continue;
    try {
      const auto data = read_arff(entry.path().string(), "", {});
      EXPECT_GT(data.train.rows, 0u) << entry.path();
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find(entry.path().string()), std::string::npos)
          << error.what();
    }
  }
}

}  // namespace
}  // namespace fluence
