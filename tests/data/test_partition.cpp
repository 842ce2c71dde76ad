#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "fluence/core/error.hpp"
#include "fluence/data/partition.hpp"
#include "fluence/data/source.hpp"
#include "support/default_deck.hpp"

namespace fluence {
namespace {

Table labelled_table(long rows, int classes) {
  SyntheticConfig config = default_data().synthetic;
  config.rows = rows;
  config.numeric = 2;
  config.categorical = {3};
  config.classes = classes;
  config.signal = 4.0;
  return generate_synthetic(config, 17);
}

void expect_exact_cover(const std::vector<std::vector<std::int64_t>>& clients, std::size_t rows) {
  std::vector<int> seen(rows, 0);
  for (const auto& client : clients) {
    EXPECT_FALSE(client.empty());
    EXPECT_TRUE(std::is_sorted(client.begin(), client.end()));
    for (auto r : client) ++seen[r];
  }
  for (std::size_t r = 0; r < rows; ++r) ASSERT_EQ(seen[r], 1) << "row " << r;
}

TEST(Synthetic, RowsDependOnlyOnSeedAndIndex) {
  SyntheticConfig config = default_data().synthetic;
  config.rows = 50;
  const Table small = generate_synthetic(config, 5);
  config.rows = 120;
  const Table large = generate_synthetic(config, 5);
  for (std::size_t r = 0; r < small.rows; ++r) {
    EXPECT_EQ(small.label[r], large.label[r]);
    for (int j = 0; j < small.numeric_count(); ++j)
      EXPECT_EQ(small.numeric[r * 4 + j], large.numeric[r * 4 + j]);
  }
  EXPECT_NE(generate_synthetic(config, 6).numeric[0], large.numeric[0]);
}

TEST(Synthetic, SplitHasExactTestCountAndIsDisjoint) {
  const Table all = labelled_table(1001, 2);
  const auto split = split_train_test(all, 0.25, 3);
  EXPECT_EQ(split.test.rows, 250u);
  EXPECT_EQ(split.train.rows, 751u);
}

TEST(Partition, IidCoversEveryRowOnceWithEqualOrSkewedSizes) {
  const Table train = labelled_table(1003, 2);
  PartitionConfig config = PartitionConfig::from_deck(default_deck());
  config.clients = 7;
  auto clients = partition_rows(train, config, 1);
  expect_exact_cover(clients, train.rows);
  for (const auto& c : clients) EXPECT_NEAR(static_cast<double>(c.size()), 1003.0 / 7, 1.0);
  config.clients = 3;
  config.sizes = {0.6, 0.3, 0.1};
  clients = partition_rows(train, config, 1);
  expect_exact_cover(clients, train.rows);
  EXPECT_EQ(clients[0].size(), 602u);
  EXPECT_EQ(clients[2].size(), 100u);
}

TEST(Partition, LabelShardsSaturateClientsWithOneLabel) {
  const Table train = labelled_table(5000, 2);
  PartitionConfig config = PartitionConfig::from_deck(default_deck());
  config.clients = 5;
  config.scheme = "label_shards";
  config.shards_per_client = 1;
  const auto clients = partition_rows(train, config, 2);
  expect_exact_cover(clients, train.rows);
  // One contiguous shard of label-sorted rows: at most one client straddles the label boundary.
  int pure = 0;
  for (const auto& client : clients) {
    std::set<int> labels;
    for (auto r : client) labels.insert(train.label[r]);
    pure += labels.size() == 1;
  }
  EXPECT_GE(pure, 4);
}

TEST(Partition, DirichletSkewGrowsAsAlphaShrinks) {
  const Table train = labelled_table(20000, 4);
  auto mean_max_share = [&](double alpha) {
    PartitionConfig config = PartitionConfig::from_deck(default_deck());
    config.clients = 10;
    config.scheme = "dirichlet";
    config.alpha = alpha;
    const auto clients = partition_rows(train, config, 3);
    expect_exact_cover(clients, train.rows);
    double total = 0.0;
    for (const auto& client : clients) {
      std::vector<int> counts(4);
      for (auto r : client) ++counts[train.label[r]];
      total += *std::max_element(counts.begin(), counts.end()) / static_cast<double>(client.size());
    }
    return total / clients.size();
  };
  std::vector<int> class_counts(4);
  for (auto label : train.label) ++class_counts[label];
  const double largest_class =
      *std::max_element(class_counts.begin(), class_counts.end()) / static_cast<double>(train.rows);
  const double iid_like = mean_max_share(1000.0), skewed = mean_max_share(0.1);
  // alpha -> inf reproduces the global label mix (2,000 rows per client: sampling error < 0.03);
  // alpha = 0.1 concentrates most clients on one class.
  EXPECT_LT(iid_like, largest_class + 0.05);
  EXPECT_GT(skewed, 0.7);
}

TEST(Partition, ColumnSplitUsesOneValuePerClientAndTakesTheColumnOutOfTheFeatures) {
  const Table original = labelled_table(900, 2);
  TrainTest data{original, original.select_rows({0, 5})};
  move_column_to_clients(data, "cat0");
  // The model's inputs no longer hold the client id: cat0 is gone from the attributes, the other
  // columns are unchanged.
  EXPECT_EQ(data.train.find_attribute("cat0"), -1);
  EXPECT_EQ(data.train.categorical_count(), 0);
  EXPECT_EQ(data.train.numeric, original.numeric);
  EXPECT_EQ(data.test.client,
            (std::vector<std::int32_t>{original.categorical[0], original.categorical[5]}));
  EXPECT_EQ(data.train.client_names, original.attributes[2].categories);
  PartitionConfig config = PartitionConfig::from_deck(default_deck());
  config.clients = 3;
  config.clients_given = true;  // as a deck that gives partition.clients
  config.scheme = "column";
  config.column = "cat0";
  const auto clients = partition_rows(data.train, config, 4);
  ASSERT_EQ(clients.size(), 3u);
  expect_exact_cover(clients, data.train.rows);
  for (int i = 0; i < 3; ++i)
    for (auto r : clients[i]) EXPECT_EQ(original.categorical[r], i);
  config.clients = 4;
  EXPECT_THROW(partition_rows(data.train, config, 4), InputError);
  // Not given in the deck: the column's value count.
  config.clients_given = false;
  EXPECT_EQ(partition_rows(data.train, config, 4), clients);
}

TEST(Partition, NaturalClientsAreTheDataClientsWithRowsInClientOrder) {
  Table train = labelled_table(12, 2);
  train.client_names = {"a", "b", "c", "d"};
  train.client = {3, 0, 3, 1, 0, 3, 3, 1, 0, 0, 3, 1};  // "c" holds no training row
  PartitionConfig config = PartitionConfig::from_deck(default_deck());
  config.scheme = "natural";
  config.clients_given = false;
  const auto clients = partition_rows(train, config, 1);
  using Rows = std::vector<std::int64_t>;
  EXPECT_EQ(clients, (std::vector<Rows>{{1, 4, 8, 9}, {3, 7, 11}, {0, 2, 5, 6, 10}}));
  config.clients_given = true;
  config.clients = 4;
  try {
    partition_rows(train, config, 1);
    FAIL();
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what())
                  .find("partition.clients = 4, but the data's clients give 3 "
                        "clients with training rows"),
              std::string::npos)
        << error.what();
  }
  train.client.clear();
  train.client_names.clear();
  EXPECT_THROW(partition_rows(train, config, 1), InputError);
}

TEST(Partition, MoreClientsThanRowsIsAnInputError) {
  const Table train = labelled_table(10, 2);
  PartitionConfig config = PartitionConfig::from_deck(default_deck());
  config.clients = 11;
  try {
    partition_rows(train, config, 1);
    FAIL();
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("partition.clients = 11 exceeds the 10 training rows"),
              std::string::npos);
  }
}

TEST(ProportionalCounts, SumExactlyToTotal) {
  const auto counts = proportional_counts(10, {1, 1, 1});
  EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), 0L), 10);
}

TEST(Encoding, StandardizesNumericAndOneHotsCategorical) {
  const Table train = labelled_table(500, 2);
  const Encoding encoding(train, true, true);
  ASSERT_EQ(encoding.width(), 2 + 3 + 1);
  std::vector<double> x(train.rows * encoding.width());
  encoding.encode_all(train, x.data());
  for (int j = 0; j < 2; ++j) {
    double mean = 0.0, squares = 0.0;
    for (std::size_t r = 0; r < train.rows; ++r) {
      mean += x[r * 6 + j] / train.rows;
      squares += x[r * 6 + j] * x[r * 6 + j] / train.rows;
    }
    EXPECT_NEAR(mean, 0.0, 1e-12);
    EXPECT_NEAR(squares, 1.0, 1e-12);
  }
  for (std::size_t r = 0; r < train.rows; ++r) {
    EXPECT_EQ(x[r * 6 + 2] + x[r * 6 + 3] + x[r * 6 + 4], 1.0);
    EXPECT_EQ(x[r * 6 + 2 + train.categorical[r]], 1.0);
    EXPECT_EQ(x[r * 6 + 5], 1.0);
  }
  const auto names = encoding.column_names(train);
  EXPECT_EQ(names[3], "cat0=v1");
  EXPECT_EQ(names[5], "(bias)");
}

// data.numeric_scaling's edge cases: a single row (a client with one row) and a constant column
// are only centred (factor 1), as the pooled standardization treats blank pixels; the other
// column of the chosen rows gets their own mean and 1/deviation (plain two-pass sums here; 1e-12
// relative covers the different summation order).
TEST(Encoding, ScalingOfChosenRowsCentresSingleRowsAndConstantColumns) {
  Table train = labelled_table(40, 2);
  for (std::size_t r = 0; r < train.rows; ++r) train.numeric[r * 2 + 1] = 2.5;  // constant
  const NumericScaling one = standardizing_scaling(train, {7}, 1, RowsHeld::local);
  EXPECT_EQ(one.mean[0], train.numeric[7 * 2]);
  EXPECT_EQ(one.scale, (std::vector<double>{1.0, 1.0}));
  const std::vector<std::int64_t> rows{3, 9, 10, 31};
  const NumericScaling some = standardizing_scaling(train, rows, rows.size(), RowsHeld::local);
  double mean = 0.0, squares = 0.0;
  for (const auto r : rows) mean += train.numeric[r * 2] / 4.0;
  for (const auto r : rows) squares += std::pow(train.numeric[r * 2] - mean, 2) / 4.0;
  EXPECT_NEAR(some.mean[0], mean, 1e-12 * std::abs(mean));
  EXPECT_NEAR(some.scale[0], 1.0 / std::sqrt(squares), 1e-12 / std::sqrt(squares));
  EXPECT_EQ(some.mean[1], 2.5);
  EXPECT_EQ(some.scale[1], 1.0);
  // An encoding with that scaling encodes a chosen row's first column as (x - mean) * scale.
  const Encoding encoding = Encoding(train, false, true).with_scaling(some);
  std::vector<double> x(static_cast<std::size_t>(encoding.width()));
  encoding.encode(train, {9}, nullptr, x.data());
  EXPECT_EQ(x[0], (train.numeric[9 * 2] - some.mean[0]) * some.scale[0]);
  EXPECT_EQ(x[1], 0.0);
}

// The rows held out for data.numeric_scaling = "public" are no client's, and with none held out
// the partition is the one partition_rows makes.
TEST(Partition, RowsHeldOutBelongToNoClient) {
  const Table train = labelled_table(300, 3);
  PartitionConfig config;
  config.clients = 6;
  config.scheme = "dirichlet";
  config.alpha = 0.5;
  EXPECT_EQ(partition_rows_except(train, {}, config, 9), partition_rows(train, config, 9));
  const auto held = public_split_rows(train, 0.2, 9);
  ASSERT_EQ(held.size(), 60u);
  EXPECT_TRUE(std::is_sorted(held.begin(), held.end()));
  EXPECT_EQ(public_split_rows(train, 0.0, 9).size(), 0u);
  auto clients = partition_rows_except(train, held, config, 9);
  clients.push_back(held);
  expect_exact_cover(clients, train.rows);
}

// A table like the IDX loader's: numeric values k / 255, one categorical attribute.
Table byte_table(std::size_t rows) {
  Table table = labelled_table(static_cast<long>(rows), 2);
  for (std::size_t i = 0; i < table.numeric.size(); ++i)
    table.numeric[i] = static_cast<double>((i * 37) % 256) / 255.0;
  table.byte_denominator = 255.0;
  return table;
}

TEST(Encoding, ByteCodesReproduceTheEncodedRows) {
  const Table train = byte_table(300);
  for (bool standardize : {true, false}) {
    const Encoding encoding(train, standardize, true);
    const auto coding = encoding.byte_coding(train);
    ASSERT_TRUE(coding.has_value());
    std::vector<std::int64_t> rows{5, 0, 299, 17};
    // Randomized categorical values replace the table's, as for a client's data.
    const std::vector<std::int32_t> categorical{2, 0, 1, 2};
    const int w = encoding.width();
    std::vector<double> x(rows.size() * w);
    std::vector<std::uint8_t> k(rows.size() * w);
    encoding.encode(train, rows, categorical.data(), x.data());
    ASSERT_TRUE(encoding.encode_bytes(train, rows, categorical.data(), *coding, k.data()));
    // (k / 255 - mean) * scale against offset + step * k: two roundings apart, 1e-15 absolute at
    // these magnitudes (|x| < 3).
    for (std::size_t i = 0; i < x.size(); ++i)
      EXPECT_NEAR(coding->offset[i % w] + coding->step[i % w] * k[i], x[i], 1e-15) << i;
  }
}

TEST(Encoding, ByteCodesNeedByteValuedNumericColumns) {
  Table train = byte_table(50);
  const Encoding encoding(train, true, true);
  const auto coding = encoding.byte_coding(train);
  ASSERT_TRUE(coding.has_value());
  std::vector<std::int64_t> rows{0, 1, 2};
  std::vector<std::uint8_t> k(rows.size() * encoding.width());
  EXPECT_TRUE(encoding.encode_bytes(train, rows, nullptr, *coding, k.data()));
  train.numeric[3] = 0.5;  // not k / 255: the claim is checked, not trusted
  EXPECT_FALSE(encoding.encode_bytes(train, rows, nullptr, *coding, k.data()));
  train.byte_denominator = 0.0;
  EXPECT_FALSE(encoding.byte_coding(train).has_value());
  // Selecting rows keeps the claim.
  EXPECT_EQ(byte_table(10).select_rows({1, 2}).byte_denominator, 255.0);
}

}  // namespace
}  // namespace fluence
