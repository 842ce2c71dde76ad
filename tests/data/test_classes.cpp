// data.classes: keeping only some classes, relabelled in the listed order. Expectations are
// computed independently, row by row, from the unfiltered data.
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/error.hpp"
#include "fluence/data/source.hpp"
#include "support/scratch_files.hpp"

namespace fluence {
namespace {

namespace fs = std::filesystem;

using Strings = std::vector<std::string>;
using Labels = std::vector<std::int32_t>;

using testing::expect_input_error;

// Five classes "a".."e"; row r has numeric value r (so a kept row names its origin), a categorical
// value r % 3 and the label labels[r].
Table labelled_table(const Labels& labels) {
  Table table;
  table.attributes = {{"x", AttributeKind::numeric, {}, 0},
                      {"colour", AttributeKind::categorical, {"red", "green", "blue"}, 0}};
  table.class_names = {"a", "b", "c", "d", "e"};
  for (std::size_t r = 0; r < labels.size(); ++r) {
    const double x = static_cast<double>(r);
    const auto colour = static_cast<std::int32_t>(r % 3);
    table.append_row(&x, &colour, labels[r]);
  }
  return table;
}

// The brute-force filter: scan rows in order, keep a row when its label is listed, and give it the
// label's position in the list.
struct Expected {
  std::vector<double> rows;  // original row indices (the "x" values)
  Labels colours, labels;
};

Expected filter_by_hand(const Table& table, const std::vector<long>& classes) {
  Expected expected;
  for (std::size_t r = 0; r < table.rows; ++r) {
    const auto position = std::find(classes.begin(), classes.end(), table.label[r]);
    if (position == classes.end()) continue;
    expected.rows.push_back(table.numeric[r]);
    expected.colours.push_back(table.categorical[r]);
    expected.labels.push_back(static_cast<std::int32_t>(position - classes.begin()));
  }
  return expected;
}

TEST(KeepClasses, KeepsListedRowsInOrderWithLabelsByListPosition) {
  const Table table = labelled_table({4, 0, 2, 1, 3, 2, 0, 4, 1, 3, 3, 0});
  const std::vector<std::vector<long>> selections = {{3, 0, 2}, {0, 1}, {4, 3, 2, 1, 0}, {1, 4}};
  for (const auto& classes : selections) {
    SCOPED_TRACE(fmt::format("classes [{}]", fmt::join(classes, ", ")));
    const Table kept = keep_classes(table, classes);
    const Expected expected = filter_by_hand(table, classes);
    EXPECT_EQ(kept.rows, expected.rows.size());
    EXPECT_EQ(kept.numeric, expected.rows);
    EXPECT_EQ(kept.categorical, expected.colours);
    EXPECT_EQ(kept.label, expected.labels);
    Strings names;
    for (long c : classes) names.push_back(table.class_names[c]);
    EXPECT_EQ(kept.class_names, names);
    EXPECT_EQ(kept.attributes.size(), table.attributes.size());
    EXPECT_EQ(kept.attributes[1].categories, table.attributes[1].categories);
  }
  // A spot check of the brute force itself: classes [3, 0, 2] keep rows 1, 2, 4, 5, 6, 9, 10, 11.
  EXPECT_EQ(filter_by_hand(table, {3, 0, 2}).rows, (std::vector<double>{1, 2, 4, 5, 6, 9, 10, 11}));
  EXPECT_EQ(filter_by_hand(table, {3, 0, 2}).labels, (Labels{1, 2, 0, 2, 1, 0, 0, 1}));
}

TEST(KeepClasses, NoMatchingRowKeepsTheSchemaAndTheNewClassNames) {
  const Table kept = keep_classes(labelled_table({0, 0, 1}), {4, 2});
  EXPECT_EQ(kept.rows, 0u);
  EXPECT_TRUE(kept.label.empty());
  EXPECT_EQ(kept.class_names, (Strings{"e", "c"}));
  EXPECT_EQ(kept.numeric_count(), 1);
  EXPECT_EQ(kept.categorical_count(), 1);
}

TEST(KeepClasses, InvalidSelectionsNameTheKeyTheValueAndTheRange) {
  const Table table = labelled_table({0, 1, 2, 3, 4});
  expect_input_error(
      [&] {
        keep_classes(table, {1, 5});
      },
      {"data.classes = [1, 5]", "[0, 5)", "5 is out of range"});
  expect_input_error(
      [&] {
        keep_classes(table, {-1, 2});
      },
      {"data.classes = [-1, 2]", "[0, 5)", "-1 is out of range"});
  expect_input_error(
      [&] {
        keep_classes(table, {1, 3, 1});
      },
      {"data.classes = [1, 3, 1]", "distinct", "1 is listed more than once"});
  expect_input_error([&] { keep_classes(table, {2}); },
                     {"data.classes = [2]", "at least 2", "[0, 5)"});
  expect_input_error([&] { keep_classes(table, {}); }, {"data.classes = []", "at least 2"});
  EXPECT_EQ(class_selection_problem({0, 4}, 5), "");
  EXPECT_EQ(class_selection_problem({7, 9}, std::nullopt), "");
}

// ---------------------------------------------------------------------------------------------
// Through the deck and load_data.

Deck deck_of(const std::string& text) {
  return Deck::from_string(text, "deck.toml", deck_schema());
}

TEST(DataClasses, DeckDefaultKeepsEveryClassAndReadsTheList) {
  EXPECT_TRUE(DataConfig::from_deck(deck_of("[data]\n")).classes.empty());
  EXPECT_EQ(
      DataConfig::from_deck(deck_of("[data]\nsynthetic.classes = 4\nclasses = [3, 1]\n")).classes,
      (std::vector<long>{3, 1}));
}

TEST(DataClasses, DeckRejectsBadListsBeforeLoading) {
  // Line 3 is `classes = ...`; the range is known before loading only for synthetic data.
  expect_input_error(
      [] { DataConfig::from_deck(deck_of("[data]\nsynthetic.classes = 3\nclasses = [0, 3]\n")); },
      {"deck.toml:3", "data.classes = [0, 3]", "[0, 3)", "3 is out of range"});
  expect_input_error(
      [] {
        DataConfig::from_deck(
            deck_of("[data]\nsource = \"csv\"\nclasses = [2, 2]\npath = \"x.csv\"\n"));
      },
      {"deck.toml:3", "data.classes = [2, 2]", "2 is listed more than once"});
  expect_input_error([] { DataConfig::from_deck(deck_of("[data]\nclasses = [1]\n")); },
                     {"deck.toml:2", "data.classes = [1]", "at least 2"});
  // Negative indices are caught by the schema.
  expect_input_error([] { deck_of("[data]\nclasses = [-1, 0]\n"); }, {"data.classes", "each >= 0"});
  // For files the range waits for the loaded class list.
  EXPECT_NO_THROW(DataConfig::from_deck(
      deck_of("[data]\nsource = \"csv\"\npath = \"x.csv\"\nclasses = [0, 99]\n")));
}

TEST(DataClasses, SyntheticFiltersBeforeTheSplitAndTheRowLimit) {
  const std::uint64_t seed = 7;
  DataConfig config =
      DataConfig::from_deck(deck_of("[data]\ntest_fraction = 0.25\nclasses = [2, 0]\n"
                                    "[data.synthetic]\nrows = 300\nclasses = 3\nsignal = 0.5\n"));
  // Independent: filter the generated rows by hand, then split what is kept.
  const Table all = generate_synthetic(config.synthetic, seed);
  Table kept = all.empty_like();
  kept.class_names = {"2", "0"};
  for (std::size_t r = 0; r < all.rows; ++r) {
    if (all.label[r] == 1) continue;
    kept.append_row(all.numeric.data() + r * 4, all.categorical.data() + r * 2,
                    all.label[r] == 2 ? 0 : 1);
  }
  ASSERT_GT(kept.rows, 100u);
  ASSERT_LT(kept.rows, all.rows);
  const TrainTest expected = split_train_test(kept, 0.25, seed);

  const TrainTest data = load_data(config, seed);
  EXPECT_EQ(data.test.rows, static_cast<std::size_t>(std::llround(0.25 * kept.rows)));
  for (const auto& [got, want] :
       {std::pair{&data.train, &expected.train}, std::pair{&data.test, &expected.test}}) {
    EXPECT_EQ(got->class_names, (Strings{"2", "0"}));
    EXPECT_EQ(got->label, want->label);
    EXPECT_EQ(got->numeric, want->numeric);
    EXPECT_EQ(got->categorical, want->categorical);
  }

  // max_train_rows counts kept rows: the first 10 of the filtered training set.
  config.max_train_rows = 10;
  const TrainTest limited = load_data(config, seed);
  EXPECT_EQ(limited.train.rows, 10u);
  EXPECT_EQ(limited.train.label,
            Labels(expected.train.label.begin(), expected.train.label.begin() + 10));
}

class CsvClassesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ =
        fs::temp_directory_path() / fmt::format("fluence_classes_{}_{}", ::getpid(), test->name());
    fs::create_directories(directory_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(directory_, ignored);
  }
  std::string write(const std::string& name, const std::string& content) const {
    const auto file = (directory_ / name).string();
    std::ofstream(file) << content;
    return file;
  }
  fs::path directory_;
};

// Labels are sorted over train and test together (cat, dog, emu), so index 2 is emu even though
// the training file lists dog first.
TEST_F(CsvClassesTest, IndexesTheSortedLabelValuesOfBothFiles) {
  const std::string train = write("train.csv", "x,animal\n0,dog\n1,emu\n2,cat\n3,emu\n4,dog\n");
  const std::string test = write("test.csv", "x,animal\n10,cat\n11,dog\n12,emu\n");
  const Deck deck = deck_of(
      fmt::format("[data]\nsource = \"csv\"\npath = \"{}\"\ntest_path = \"{}\"\nclasses = [2, 0]\n",
                  train, test));
  const TrainTest data = load_data(DataConfig::from_deck(deck), 1);
  EXPECT_EQ(data.train.class_names, (Strings{"emu", "cat"}));
  EXPECT_EQ(data.train.numeric, (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(data.train.label, (Labels{0, 1, 0}));
  EXPECT_EQ(data.test.class_names, (Strings{"emu", "cat"}));
  EXPECT_EQ(data.test.numeric, (std::vector<double>{10, 12}));
  EXPECT_EQ(data.test.label, (Labels{1, 0}));

  const Deck out_of_range =
      deck_of(fmt::format("[data]\nsource = \"csv\"\npath = \"{}\"\nclasses = [0, 3]\n", train));
  expect_input_error([&] { load_data(DataConfig::from_deck(out_of_range), 1); },
                     {"data.classes = [0, 3]", "[0, 3)", "3 is out of range"});
}

}  // namespace
}  // namespace fluence
