#include <gtest/gtest.h>

#include <cmath>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/error.hpp"
#include "fluence/data/source.hpp"
#include "fluence/privacy/purposes.hpp"
#include "fluence/privacy/randomized_response.hpp"
#include "support/default_deck.hpp"

namespace fluence {
namespace {

TEST(RandomizedResponse, DistortionMatrixIsStochasticAndEpsilonLdp) {
  for (int k : {2, 3, 7}) {
    for (double eps : {0.1, 1.0, 3.0}) {
      const auto p = distortion_matrix(eps, k);
      for (int u = 0; u < k; ++u) {
        double row = 0.0;
        for (int v = 0; v < k; ++v) row += p[u * k + v];
        EXPECT_NEAR(row, 1.0, 1e-15);
        // Definition 1: the largest ratio of output probabilities over inputs is exactly e^eps.
        for (int v = 0; v < k; ++v)
          for (int u2 = 0; u2 < k; ++u2)
            EXPECT_LE(p[u * k + v] / p[u2 * k + v], std::exp(eps) * (1 + 1e-12));
      }
      EXPECT_NEAR(p[0] / p[1], std::exp(eps), 1e-12 * std::exp(eps));
    }
  }
  EXPECT_DOUBLE_EQ(rr_keep_probability(INFINITY, 5), 1.0);
  EXPECT_DOUBLE_EQ(rr_keep_probability(2.0, 3), std::exp(2.0) / (2 + std::exp(2.0)));
}

TEST(RandomizedResponse, EmpiricalReportsFollowTheDistortionMatrix) {
  const int k = 4, truth = 2;
  const double eps = 1.0;
  const long draws = 400000;
  std::vector<long> counts(k);
  for (long i = 0; i < draws; ++i) {
    Stream stream(9, purpose::randomized_response, static_cast<std::uint64_t>(i));
    ++counts[randomize_value(truth, k, eps, stream)];
  }
  const auto p = distortion_matrix(eps, k);
  for (int v = 0; v < k; ++v) {
    const double q = p[truth * k + v];
    // Binomial count: 5 standard deviations.
    EXPECT_NEAR(counts[v], q * draws, 5 * std::sqrt(draws * q * (1 - q))) << "value " << v;
  }
}

Table tiny_schema() {
  SyntheticConfig config = default_data().synthetic;
  config.rows = 20;
  config.numeric = 1;
  config.categorical = {3, 4};
  return generate_synthetic(config, 1);
}

TEST(LdpPlan, ResolvesAttributesAndPerClientOverrides) {
  const Deck deck = Deck::from_string(
      "[ldp]\nattributes = [\"cat1\", \"label\"]\nepsilon = 2\n"
      "[[ldp.client]]\nid = 1\nepsilon = { label = 0.5 }\n"
      "[[ldp.client]]\nids = [2]\nepsilon = \"inf\"\n",
      "d", deck_schema());
  const auto plan = LdpPlan::from_deck(deck, tiny_schema(), 3);
  EXPECT_EQ(plan.categorical_column, (std::vector<int>{1, -1}));
  EXPECT_EQ(plan.domain, (std::vector<int>{4, 2}));
  EXPECT_DOUBLE_EQ(plan.epsilon_of(0, 0), 2.0);
  EXPECT_DOUBLE_EQ(plan.epsilon_of(1, 0), 2.0);
  EXPECT_DOUBLE_EQ(plan.epsilon_of(1, 1), 0.5);
  EXPECT_TRUE(std::isinf(plan.epsilon_of(2, 0)));
}

TEST(LdpPlan, UnknownOrNumericAttributesAreInputErrors) {
  auto message = [](const std::string& text) {
    try {
      LdpPlan::from_deck(Deck::from_string(text, "d", deck_schema()), tiny_schema(), 3);
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_NE(message("[ldp]\nattributes = [\"sex\"]\n").find("\"sex\", which is not an attribute"),
            std::string::npos);
  EXPECT_NE(message("[ldp]\nattributes = [\"num0\"]\n").find("numeric"), std::string::npos);
  EXPECT_NE(message("[ldp]\nattributes = [\"label\"]\n[[ldp.client]]\nid = 7\nepsilon = 1\n")
                .find("client 7 does not exist"),
            std::string::npos);
  EXPECT_NE(message("[ldp]\nattributes = [\"label\"]\nepsilon = { cat0 = 1 }\n")
                .find("not listed in ldp.attributes"),
            std::string::npos);
}

TEST(RandomizedResponse, ClientRowsAreRandomizedOnlyWhereAsked) {
  SyntheticConfig config = default_data().synthetic;
  config.rows = 4000;
  config.numeric = 0;
  config.categorical = {3, 5};
  const Table table = generate_synthetic(config, 3);
  const Deck deck =
      Deck::from_string("[ldp]\nattributes = [\"cat1\"]\nepsilon = 1.0\n", "d", deck_schema());
  const auto plan = LdpPlan::from_deck(deck, table, 1);
  std::vector<std::int64_t> rows(table.rows);
  for (std::size_t r = 0; r < table.rows; ++r) rows[r] = static_cast<std::int64_t>(r);
  std::vector<std::int32_t> categorical, labels;
  randomize_client_rows(plan, 0, table, rows, 5, 0, categorical, labels);
  long kept = 0;
  for (std::size_t r = 0; r < table.rows; ++r) {
    EXPECT_EQ(categorical[r * 2], table.categorical[r * 2]);  // cat0 untouched
    EXPECT_EQ(labels[r], table.label[r]);
    kept += categorical[r * 2 + 1] == table.categorical[r * 2 + 1];
  }
  const double p = rr_keep_probability(1.0, 5);
  EXPECT_NEAR(kept, p * table.rows, 5 * std::sqrt(table.rows * p * (1 - p)));
}

}  // namespace
}  // namespace fluence
