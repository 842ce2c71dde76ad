#include "fluence/io/whatif_output.hpp"

#include <algorithm>
#include <cmath>

namespace fluence {

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ",") + name;
  return text;
}

// MAE and rho per fraction (NaN without retraining); against the expected retrain when it ran.
void write_metrics(ResultsFile& file, const std::string& base, std::size_t K,
                   const WhatifConfig& config, const EstimateMetrics& metrics) {
  auto or_nan = [&](const std::vector<double>& values) {
    return values.empty() ? std::vector<double>(K, std::nan("")) : values;
  };
  file.dataset(base + "mae", or_nan(metrics.mae));
  file.dataset(base + "spearman", or_nan(metrics.spearman));
  file.dataset(base + "mae_per_draw", or_nan(metrics.mae_per_draw));
  file.dataset(base + "spearman_per_draw", or_nan(metrics.spearman_per_draw));
  if (!config.retrain || !config.expected_retrain) return;
  file.dataset(base + "mae_expected", or_nan(metrics.mae_expected));
  file.dataset(base + "spearman_expected", or_nan(metrics.spearman_expected));
}

void write_variant(ResultsFile& file, const WhatifConfig& config,
                   const WhatifVariantResult& variant) {
  const std::string base = "/whatif/" + to_string(variant.variant) + "/";
  const std::size_t K = config.fractions.size(), E = config.epsilons.size();
  file.dataset(base + "estimated", variant.estimated, {K, E});
  write_metrics(file, base, K, config, variant.first);
  if (config.second_order) {
    file.dataset(base + "second_order/estimated", variant.second_order, {K, E});
    write_metrics(file, base + "second_order/", K, config, variant.second);
  }
  if (!config.retrain) return;
  file.dataset(base + "actual", variant.actual, {K, E, static_cast<std::size_t>(config.repeats)});
  if (config.expected_retrain)
    file.dataset(base + "expected_retrain", variant.expected_retrain, {K, E});
}

void write_timing(ResultsFile& file, const WhatifConfig& config, const WhatifResult& result,
                  double training_seconds) {
  const double cells =
      static_cast<double>(config.cells() * std::max<std::size_t>(1, config.variants.size()));
  file.scalar("/whatif/timing/initial_training_s", training_seconds);
  file.scalar("/whatif/timing/ihvp_s", result.time_ihvp);
  file.scalar("/whatif/timing/influence_cells_s", result.time_cells);
  file.scalar("/whatif/timing/influence_total_s", result.time_ihvp + result.time_cells);
  file.scalar("/whatif/timing/second_order_s", result.time_second_order);
  file.scalar("/whatif/timing/per_cell_s", result.time_cells / cells);
  file.scalar("/whatif/timing/retrain_total_s", result.time_retrain);
  file.scalar("/whatif/timing/retrain_per_cell_s",
              result.retrain_count > 0
                  ? result.time_retrain / static_cast<double>(result.retrain_count)
                  : std::nan(""));
  file.dataset("/whatif/timing/retrain_count",
               std::vector<std::int64_t>{static_cast<std::int64_t>(result.retrain_count)});
}

}  // namespace

void write_whatif_output(ResultsFile& file, const InfluenceConfig& influence,
                         const WhatifConfig& config, const WhatifResult& result,
                         double training_seconds) {
  file.dataset("/whatif/eps", config.epsilons);
  file.dataset("/whatif/group_fraction", config.fractions);
  file.dataset("/whatif/group_rows", result.group_rows);
  std::vector<std::string> attributes;
  for (const auto& attribute : config.attributes) attributes.push_back(attribute.name);
  std::vector<std::string> variants;
  for (const auto& variant : result.variants) variants.push_back(to_string(variant.variant));
  file.attribute("/whatif", "group_attribute", config.group_attribute);
  file.attribute("/whatif", "group_values", joined(config.group_value_names));
  file.attribute("/whatif", "group_size", result.group_size);
  file.attribute("/whatif", "attributes", joined(attributes));
  file.attribute("/whatif", "variants", joined(variants));
  file.attribute("/whatif", "test_rows", result.test_rows);
  file.attribute("/whatif", "rr_form",
                 std::string(config.rr_form == EstimateForm::paper ? "paper" : "expected"));
  file.attribute("/whatif", "flc_form",
                 std::string(config.flc_form == EstimateForm::paper ? "paper" : "expected"));
  file.attribute("/whatif", "draws", std::string(config.common_draws ? "common" : "independent"));
  file.scalar("/whatif/base_test_loss", result.base_test_loss);
  file.scalar("/whatif/base_test_accuracy", result.base_test_accuracy);
  file.string("/whatif/solver", to_string(influence.ihvp.method));
  file.scalar("/whatif/damping", result.damping);
  file.scalar("/whatif/ihvp_relative_residual", result.s_test_report.relative_residual);
  file.dataset("/whatif/ihvp_iterations",
               std::vector<std::int64_t>{result.s_test_report.iterations});
  if (config.retrain) {
    file.dataset("/whatif/retrain_iterations",
                 std::vector<std::int64_t>{static_cast<std::int64_t>(result.retrain_iterations)});
    file.scalar("/whatif/retrain_worst_gradient_norm", result.worst_gradient_norm);
  }
  for (const auto& variant : result.variants) write_variant(file, config, variant);
  write_timing(file, config, result, training_seconds);
}

}  // namespace fluence
