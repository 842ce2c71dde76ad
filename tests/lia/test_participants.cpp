// The LIA set-up (seed 002 §IV): warm-up, batches and validation sets are disjoint while the data
// last and overlap only across participants after that; label shift is a derangement applied to
// exactly the corrupted share of the corrupted batches; Dirichlet mixes concentrate labels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "fluence/core/config.hpp"
#include "fluence/core/error.hpp"
#include "fluence/data/source.hpp"
#include "fluence/lia/lia.hpp"
#include "fluence/lia/participants.hpp"
#include "support/default_deck.hpp"

namespace fluence::lia {
namespace {

Table synthetic_table(long rows, int classes) {
  SyntheticConfig config = default_data().synthetic;
  config.rows = rows;
  config.numeric = 3;
  config.categorical = {};
  config.classes = classes;
  return generate_synthetic(config, 7);
}

LiaConfig small_config(int participants) {
  // The declared defaults; the class count only bounds lia.minority.class (0 by default).
  LiaConfig config = LiaConfig::from_deck(default_deck(), 2);
  config.participants = participants;
  config.train_size = 20;
  config.validation_size = 10;
  config.warmup_fraction = 0.05;
  config.alpha = 0.5;
  config.corrupted_fraction = 0.3;
  config.corruption_rate = 0.9;
  return config;
}

TEST(LiaParticipants, DisjointWhileTheDataLast) {
  const Table table = synthetic_table(2000, 4);
  const LiaConfig config = small_config(50);  // 50 x 30 = 1500 <= 1900 rows after warm-up
  const ParticipantData data = assign_participants(table, config, 3);
  EXPECT_FALSE(data.overlapping);
  EXPECT_EQ(data.warmup.size(), 100u);
  std::set<std::int64_t> seen(data.warmup.begin(), data.warmup.end());
  for (int i = 0; i < config.participants; ++i) {
    ASSERT_EQ(data.train[i].size(), 20u);
    ASSERT_EQ(data.validation[i].size(), 10u);
    for (const auto* rows : {&data.train[i], &data.validation[i]})
      for (auto row : *rows) EXPECT_TRUE(seen.insert(row).second) << "row " << row << " reused";
  }
  EXPECT_EQ(data.corrupted.size(), 15u);
}

TEST(LiaParticipants, OverlapOnlyAcrossParticipantsWhenTheDataRunOut) {
  const Table table = synthetic_table(600, 3);
  const LiaConfig config = small_config(40);  // 1200 rows wanted from 570
  const ParticipantData data = assign_participants(table, config, 3);
  EXPECT_TRUE(data.overlapping);
  const std::set<std::int64_t> warm(data.warmup.begin(), data.warmup.end());
  for (int i = 0; i < config.participants; ++i) {
    std::set<std::int64_t> own;
    for (const auto* rows : {&data.train[i], &data.validation[i]})
      for (auto row : *rows) {
        EXPECT_TRUE(own.insert(row).second)
            << "participant " << i << " holds row " << row << " twice";
        EXPECT_FALSE(warm.count(row)) << "warm-up row " << row << " given to participant " << i;
      }
  }
}

// The public split (lia.public_fraction) trains the body: no participant may hold one of its rows,
// nor may the warm-up; without it, the warm-up and the participants' rows are those of a deck
// without the key (the split comes first in the permutation).
TEST(LiaParticipants, PublicSplitIsHeldByNoParticipantNorTheWarmup) {
  const Table table = synthetic_table(2000, 4);
  LiaConfig config = small_config(80);  // 80 x 30 = 2400 rows wanted: they overlap
  const ParticipantData without = assign_participants(table, config, 5);
  EXPECT_TRUE(without.public_rows.empty());
  config.public_fraction = 0.2;
  const ParticipantData data = assign_participants(table, config, 5);
  ASSERT_EQ(data.public_rows.size(), 400u);
  EXPECT_EQ(data.warmup.size(), 100u);
  const std::set<std::int64_t> held(data.public_rows.begin(), data.public_rows.end());
  EXPECT_EQ(held.size(), 400u);
  for (auto row : data.warmup) EXPECT_FALSE(held.count(row)) << "public row " << row << " warm";
  for (int i = 0; i < config.participants; ++i)
    for (const auto* rows : {&data.train[i], &data.validation[i]})
      for (auto row : *rows)
        EXPECT_FALSE(held.count(row)) << "public row " << row << " given to participant " << i;
  // The order is one permutation: the split takes its head, the warm-up the rows after it.
  std::size_t shared = 0;
  for (auto row : without.warmup) shared += held.count(row);
  EXPECT_EQ(shared, without.warmup.size()) << "the old warm-up is the head of the permutation";
  config.public_fraction = 0.96;
  EXPECT_THROW(assign_participants(table, config, 5), InputError);
}

TEST(LiaParticipants, LabelShiftIsADerangementOnTheCorruptedShare) {
  const Table table = synthetic_table(3000, 5);
  const LiaConfig config = small_config(60);
  const ParticipantData data = assign_participants(table, config, 11);
  for (int c = 0; c < 5; ++c) EXPECT_NE(data.label_map[c], c);
  std::set<std::int32_t> image(data.label_map.begin(), data.label_map.end());
  EXPECT_EQ(image.size(), 5u);  // a permutation
  const std::set<std::int64_t> corrupted(data.corrupted.begin(), data.corrupted.end());
  for (int i = 0; i < config.participants; ++i) {
    int changed = 0;
    for (std::size_t k = 0; k < data.train[i].size(); ++k) {
      const auto truth = table.label[data.train[i][k]];
      if (data.train_label[i][k] != truth) {
        EXPECT_EQ(data.train_label[i][k], data.label_map[truth]);
        ++changed;
      }
    }
    EXPECT_EQ(changed, corrupted.count(i) ? 18 : 0) << "participant " << i;  // round(0.9 x 20)
  }
}

TEST(LiaParticipants, SmallAlphaConcentratesLabels) {
  const Table table = synthetic_table(20000, 10);
  std::vector<double> population(10, 0.0);
  for (auto label : table.label) population[label] += 1.0 / static_cast<double>(table.rows);
  // Mean total-variation distance between a participant's label shares and the population's.
  auto mean_distance = [&](double alpha) {
    LiaConfig config = small_config(100);
    config.alpha = alpha;
    config.train_size = 60;
    config.validation_size = 30;
    const ParticipantData data = assign_participants(table, config, 5);
    double total = 0.0;
    for (int i = 0; i < config.participants; ++i) {
      std::vector<double> share(10, 0.0);
      for (auto row : data.train[i]) share[table.label[row]] += 1.0 / 90;
      for (auto row : data.validation[i]) share[table.label[row]] += 1.0 / 90;
      for (int c = 0; c < 10; ++c) total += 0.5 * std::abs(share[c] - population[c]);
    }
    return total / config.participants;
  };
  // Dirichlet(0.1) over 10 labels puts most mass on one or two labels: far from the population.
  // IID draws of 90 rows differ from it by sampling noise only (expected TV about 0.1).
  EXPECT_GT(mean_distance(0.1), 0.5);
  EXPECT_LT(mean_distance(std::numeric_limits<double>::infinity()), 0.2);
}

TEST(LiaParticipants, MinorityRunsLackTheClassAndTheNewcomerHasItsShare) {
  const Table table = synthetic_table(4000, 4);
  LiaConfig config = small_config(30);
  config.minority_class = 2;
  const ParticipantData data = assign_participants(table, config, 9, 2);
  for (int i = 0; i < config.participants; ++i)
    for (auto row : data.validation[i]) EXPECT_NE(table.label[row], 2);
  const auto batch = minority_batch(table, data, config, 0.15, 9, 0);
  ASSERT_EQ(batch.size(), 20u);
  const auto minority = std::count_if(batch.begin(), batch.end(),
                                      [&](std::int64_t row) { return table.label[row] == 2; });
  EXPECT_EQ(minority, 3);  // round(0.15 x 20)
}

}  // namespace
}  // namespace fluence::lia
