// data.numeric_scaling's protocol-respecting choices (issue 26), at 1-4 ranks, against statistics
// the test computes itself from the raw rows: "per_client" standardizes each client's rows with
// their own mean/std and the server's test set with its own; "public" takes the mean/std of the
// rows no client holds (data.public_fraction), and no client's row can move them.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/fl/problem.hpp"
#include "support/scratch_files.hpp"
#include "support/whole_data.hpp"

namespace fluence {
namespace {

// Mean and population deviation of `values`, plain two-pass sums (the independent computation).
std::pair<double, double> mean_and_deviation(const std::vector<double>& values) {
  double sum = 0.0;
  for (const double v : values) sum += v;
  const double mean = sum / static_cast<double>(values.size());
  double squares = 0.0;
  for (const double v : values) squares += (v - mean) * (v - mean);
  return {mean, std::sqrt(squares / static_cast<double>(values.size()))};
}

// Where each numeric attribute's column is in the encoded rows, by numeric column index.
std::vector<int> numeric_columns(const FederatedProblem& problem) {
  const Table& schema = problem.data.train;
  const auto names = problem.encoding.column_names(schema);
  std::vector<int> columns(static_cast<std::size_t>(schema.numeric_count()));
  for (const auto& attribute : schema.attributes)
    if (attribute.kind == AttributeKind::numeric)
      columns[attribute.column] =
          static_cast<int>(std::find(names.begin(), names.end(), attribute.name) - names.begin());
  return columns;
}

const char* kPerClientDeck = R"(
seed = 11
[data]
numeric_scaling = "per_client"
[data.synthetic]
rows = 1200
numeric = 3
categorical = [3]
classes = 3
signal = 3.0
[partition]
clients = 7
scheme = "dirichlet"
alpha = 0.3
)";

// Every hosted client's encoded numeric column is (x - m) / s with m and s its own rows' mean and
// deviation, so it has mean 0 and deviation 1. The encoded values are O(3) and both sides sum at
// most a few hundred terms in different orders (exact sums in the code, a plain loop here): they
// agree to a few ulps of the largest term, far inside 1e-12; pooled statistics (what
// "standardize" does) miss by O(0.1) under this label skew.
TEST(NumericScaling, PerClientRowsAreStandardizedWithTheirOwnStatistics) {
  const Deck deck = Deck::from_string(kPerClientDeck, "test", deck_schema());
  const FederatedProblem problem = build_problem(deck);
  const Table& train = problem.data.train;
  const auto columns = numeric_columns(problem);
  const auto width = static_cast<std::size_t>(problem.encoding.width());
  for (const Client& client : problem.clients) {
    ASSERT_GT(client.size(), 1u) << client.id();
    for (std::size_t j = 0; j < columns.size(); ++j) {
      std::vector<double> raw, encoded;
      for (std::size_t i = 0; i < client.size(); ++i) {
        raw.push_back(train.numeric_row(client.rows()[i])[j]);
        encoded.push_back(client.features()[i * width + static_cast<std::size_t>(columns[j])]);
      }
      const auto [mean, deviation] = mean_and_deviation(raw);
      for (std::size_t i = 0; i < raw.size(); ++i)
        EXPECT_NEAR(encoded[i], (raw[i] - mean) / deviation, 1e-12) << client.id() << " " << i;
      const auto [encoded_mean, encoded_deviation] = mean_and_deviation(encoded);
      EXPECT_NEAR(encoded_mean, 0.0, 1e-12) << "client " << client.id() << " column " << j;
      EXPECT_NEAR(encoded_deviation, 1.0, 1e-12) << "client " << client.id() << " column " << j;
    }
  }
}

// The server's test set (split over the ranks for the logistic model) with the test set's own
// statistics: over every rank's shard the encoded columns have mean 0 and deviation 1 (sums of
// 240 terms of O(3): 1e-12 is far above their rounding).
TEST(NumericScaling, PerClientTestSetIsStandardizedWithItsOwnStatistics) {
  const FederatedProblem problem =
      build_problem(Deck::from_string(kPerClientDeck, "test", deck_schema()));
  const auto columns = numeric_columns(problem);
  const auto width = static_cast<std::size_t>(problem.encoding.width());
  const TestShard& test = problem.test;
  for (std::size_t j = 0; j < columns.size(); ++j) {
    double sums[2] = {0.0, 0.0};
    for (std::size_t i = 0; i < test.rows; ++i) {
      const double x = test.features[i * width + static_cast<std::size_t>(columns[j])];
      sums[0] += x;
      sums[1] += x * x;
    }
    MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    const auto n = static_cast<double>(problem.data.test.rows);
    EXPECT_NEAR(sums[0] / n, 0.0, 1e-12) << j;
    EXPECT_NEAR(sums[1] / n, 1.0, 1e-12) << j;
  }
}

class PublicScaling : public testing::ScratchDirectoryTest {
 protected:
  // 250 rows (a, b numeric, g categorical, label): a = i is unique, so a row can be found again.
  // b is a multiple of 1/16, exact in binary and in its text (a value computed with sin() could
  // differ in its last bit between two inlined copies of this loop, one using FMA).
  std::string write_rows(const std::string& name, double perturbed_a) const {
    std::string text = "a,b,g,label\n";
    for (int i = 0; i < 250; ++i) {
      const double b = static_cast<double>((i * 37) % 101 - 50) / 16.0;
      const bool perturbed = i == static_cast<int>(perturbed_a);
      text += fmt::format("{},{},{},{}\n", perturbed ? 1e6 : i, perturbed ? -1e6 : b, "xyz"[i % 3],
                          i % 4 == 0 ? "yes" : "no");
    }
    return write(name, text);
  }

  Deck deck(const std::string& path, const std::string& scaling) const {
    return Deck::from_string(fmt::format(R"(
seed = 3
[data]
source = "csv"
path = "{}"
categorical = ["g"]
test_fraction = 0.2
numeric_scaling = "{}"
public_fraction = {}
[partition]
clients = 5
scheme = "iid"
[ldp]
attributes = []
)",
                                         path, scaling, scaling == "public" ? 0.25 : 0.0),
                             "test", deck_schema());
  }
};

// The public rows are held out of every client, and the encoding's mean/std are theirs: two-pass
// sums over 40 values of O(250) (here plain, in the code exact), agreeing to 1e-12 relative.
TEST_F(PublicScaling, StatisticsAreThoseOfThePublicRowsHeldByNoClient) {
  const Deck public_deck = deck(write_rows("rows.csv", -1), "public");
  const FederatedProblem problem = build_problem(public_deck);
  const Table whole = testing::whole_training_table(public_deck);
  const auto& public_rows = problem.public_rows;
  ASSERT_EQ(public_rows.size(), static_cast<std::size_t>(std::llround(0.25 * whole.rows)));
  std::vector<int> owners(whole.rows, 0);
  for (const auto row : public_rows) ++owners[row];
  for (const auto& rows : problem.client_rows)
    for (const auto row : rows) ++owners[row];
  for (std::size_t r = 0; r < whole.rows; ++r) EXPECT_EQ(owners[r], 1) << r;
  EXPECT_EQ(problem.total_train_rows, static_cast<std::int64_t>(whole.rows - public_rows.size()));
  for (int j = 0; j < whole.numeric_count(); ++j) {
    std::vector<double> values;
    for (const auto row : public_rows) values.push_back(whole.numeric_row(row)[j]);
    const auto [mean, deviation] = mean_and_deviation(values);
    EXPECT_NEAR(problem.encoding.means()[j], mean, 1e-12 * std::abs(mean) + 1e-13) << j;
    EXPECT_NEAR(problem.encoding.scales()[j], 1.0 / deviation, 1e-12 / deviation) << j;
  }
}

// A client's row changed beyond recognition leaves the statistics and every other row's encoding
// bit for bit as they were; under "standardize" (pooled) the same change moves them.
TEST_F(PublicScaling, NoClientRowChangesTheStatistics) {
  const std::string plain = write_rows("plain.csv", -1);
  const FederatedProblem before = build_problem(deck(plain, "public"));
  const Table whole = testing::whole_training_table(deck(plain, "public"));
  // The first row of client 0: its a value names its line in the file.
  const std::int64_t changed_row = before.client_rows[0].front();
  const double changed_a = whole.numeric_row(changed_row)[0];
  const std::string perturbed = write_rows("perturbed.csv", changed_a);
  const FederatedProblem after = build_problem(deck(perturbed, "public"));
  EXPECT_EQ(after.encoding.means(), before.encoding.means());
  EXPECT_EQ(after.encoding.scales(), before.encoding.scales());
  const auto width = static_cast<std::size_t>(before.encoding.width());
  ASSERT_EQ(after.clients.size(), before.clients.size());
  for (std::size_t k = 0; k < before.clients.size(); ++k) {
    const Client &was = before.clients[k], &is = after.clients[k];
    ASSERT_EQ(is.rows(), was.rows());
    for (std::size_t i = 0; i < was.size(); ++i) {
      if (was.rows()[i] == changed_row) continue;
      for (std::size_t c = 0; c < width; ++c)
        EXPECT_EQ(is.features()[i * width + c], was.features()[i * width + c]) << i << " " << c;
    }
  }
  const FederatedProblem pooled_before = build_problem(deck(plain, "standardize"));
  const FederatedProblem pooled_after = build_problem(deck(perturbed, "standardize"));
  EXPECT_NE(pooled_after.encoding.means(), pooled_before.encoding.means());
}

TEST_F(PublicScaling, PublicWithoutPublicRowsIsRefusedNamingBothKeys) {
  const std::string path = write_rows("rows.csv", -1);
  testing::expect_input_error(
      [&] {
        build_problem(Deck::from_string(
            fmt::format("[data]\nsource = \"csv\"\npath = \"{}\"\ncategorical = [\"g\"]\n"
                        "numeric_scaling = \"public\"\n[ldp]\nattributes = []\n",
                        path),
            "test", deck_schema()));
      },
      {"data.numeric_scaling = \"public\"", "data.public_fraction = 0"});
}

}  // namespace
}  // namespace fluence
