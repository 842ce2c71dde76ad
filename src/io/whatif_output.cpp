#include "fluence/io/whatif_output.hpp"

#include "fluence/influence/trust.hpp"
#include "fluence/io/influence_output.hpp"

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
  const std::vector<std::string> fraction{"group_fraction"};
  file.dataset(base + "mae", or_nan(metrics.mae),
               {fraction, "nat", "MAE of the estimate against the mean retrain"});
  file.dataset(base + "spearman", or_nan(metrics.spearman),
               {fraction, "1", "Spearman correlation with the mean retrain over the eps grid"});
  file.dataset(base + "mae_per_draw", or_nan(metrics.mae_per_draw),
               {fraction, "nat", "MAE of the estimate against each retrain, averaged"});
  file.dataset(base + "spearman_per_draw", or_nan(metrics.spearman_per_draw),
               {fraction, "1", "Spearman correlation with each retrain, averaged"});
  if (!config.retrain || !config.expected_retrain) return;
  file.dataset(base + "mae_expected", or_nan(metrics.mae_expected),
               {fraction, "nat", "MAE of the estimate against the expected retrain"});
  file.dataset(base + "spearman_expected", or_nan(metrics.spearman_expected),
               {fraction, "1", "Spearman correlation with the expected retrain"});
}

void write_variant(ResultsFile& file, const InfluenceConfig& influence, const WhatifConfig& config,
                   const WhatifVariantResult& variant, double eigenvalue_max) {
  const std::string base = "/whatif/" + to_string(variant.variant) + "/";
  const std::size_t K = config.fractions.size();
  const std::vector<std::string> cell{"group_fraction", "eps"};
  file.dataset(base + "estimated", variant.estimated,
               {cell, "nat", "first-order estimate of the change of the test loss"});
  write_metrics(file, base, K, config, variant.first);
  if (config.second_order) {
    file.dataset(base + "second_order/estimated", variant.second_order,
                 {cell, "nat", "second-order estimate of the change of the test loss"});
    write_metrics(file, base + "second_order/", K, config, variant.second);
  }
  if (!config.retrain) return;
  file.dataset(base + "actual", variant.actual,
               {{"group_fraction", "eps", "draw"},
                "nat",
                "change of the test loss after randomizing and retraining"});
  if (config.expected_retrain)
    file.dataset(base + "expected_retrain", variant.expected_retrain,
                 {cell, "nat", "change of the test loss after the expected retrain"});
  // Whether each retrain stands for the change it measures (docs/outputs.md), and the metrics
  // over the cells whose retrains all do.
  // The flags are derived from the stored norms and curvatures by the rules whatif's trusted
  // cells use (the checkpoint keeps only the values).
  const auto flags = [](const std::vector<double>& values, auto&& holds) {
    std::vector<std::int64_t> out;
    for (double value : values) out.push_back(holds(value) ? 1 : 0);
    return out;
  };
  const auto converged = [&](const std::vector<double>& norms) {
    return flags(norms, [&](double norm) { return norm <= config.retrain_tolerance; });
  };
  const std::vector<std::string> draw_cell{"group_fraction", "eps", "draw"};
  file.dataset(base + "actual_gradient_norm", variant.actual_gradient_norm,
               {draw_cell, "1", "final gradient norm of the perturbed objective at the retrain"});
  file.dataset(base + "actual_converged", converged(variant.actual_gradient_norm),
               {draw_cell, "1", "1 when the retrain reached whatif.retrain_tolerance"});
  if (config.expected_retrain) {
    file.dataset(base + "expected_retrain_gradient_norm", variant.expected_gradient_norm,
                 {cell, "1", "final gradient norm of the expected objective at its retrain"});
    file.dataset(base + "expected_retrain_converged", converged(variant.expected_gradient_norm),
                 {cell, "1", "1 when the expected retrain reached whatif.retrain_tolerance"});
  }
  if (influence.spectrum) {
    const auto saddle = [&](const std::vector<double>& curvature) {
      return flags(curvature, [&](double value) { return is_saddle(value, eigenvalue_max); });
    };
    file.dataset(base + "actual_min_eigenvalue", variant.actual_min_eigenvalue,
                 {draw_cell, "1", "smallest Hessian eigenvalue of the perturbed objective there"});
    file.dataset(base + "actual_saddle", saddle(variant.actual_min_eigenvalue),
                 {draw_cell, "1", "1 when the retrain stopped at a saddle point"});
    if (config.expected_retrain) {
      file.dataset(base + "expected_retrain_min_eigenvalue", variant.expected_min_eigenvalue,
                   {cell, "1", "smallest Hessian eigenvalue of the expected objective there"});
      file.dataset(base + "expected_retrain_saddle", saddle(variant.expected_min_eigenvalue),
                   {cell, "1", "1 when the expected retrain stopped at a saddle point"});
    }
  }
  write_metrics(file, base + "trusted/", K, config, variant.first_trusted);
  if (config.second_order)
    write_metrics(file, base + "second_order/trusted/", K, config, variant.second_trusted);
}

void write_timing(ResultsFile& file, const WhatifConfig& config, const WhatifResult& result,
                  double training_seconds) {
  const double cells =
      static_cast<double>(config.cells() * std::max<std::size_t>(1, config.variants.size()));
  file.scalar("/whatif/timing/initial_training_s", training_seconds, "s",
              "wall time of the initial training");
  file.scalar("/whatif/timing/ihvp_s", result.time_ihvp, "s", "wall time of s_test");
  file.scalar("/whatif/timing/influence_cells_s", result.time_cells, "s",
              "wall time of the first-order cells");
  file.scalar("/whatif/timing/influence_total_s", result.time_ihvp + result.time_cells, "s",
              "wall time of s_test and the first-order cells");
  file.scalar("/whatif/timing/second_order_s", result.time_second_order, "s",
              "wall time of the second-order cells");
  file.scalar("/whatif/timing/per_cell_s", result.time_cells / cells, "s",
              "wall time per first-order cell");
  file.scalar("/whatif/timing/retrain_total_s", result.time_retrain, "s",
              "wall time of the retrains");
  file.scalar("/whatif/timing/retrain_per_cell_s",
              result.retrain_count > 0
                  ? result.time_retrain / static_cast<double>(result.retrain_count)
                  : std::nan(""),
              "s", "wall time per retrain");
  file.dataset("/whatif/timing/retrain_count",
               std::vector<std::int64_t>{static_cast<std::int64_t>(result.retrain_count)},
               {{"total"}, "count", "retrains run"});
}

}  // namespace

void write_whatif_output(ResultsFile& file, const InfluenceConfig& influence,
                         const WhatifConfig& config, const WhatifResult& result,
                         double training_seconds) {
  file.coordinate("/whatif/eps", config.epsilons, "1", "local differential privacy epsilon");
  file.coordinate("/whatif/group_fraction", config.fractions, "1",
                  "fraction of the group perturbed");
  file.dimension("/whatif/draw", static_cast<std::size_t>(config.repeats));
  file.dimension("/whatif/solve", 1);
  file.dimension("/whatif/total", 1);
  file.dataset("/whatif/group_rows", result.group_rows,
               {{"group_fraction"}, "count", "records perturbed"});
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
  file.scalar("/whatif/base_test_loss", result.base_test_loss, "nat",
              "test loss of the trained model");
  file.scalar("/whatif/base_test_accuracy", result.base_test_accuracy, "1",
              "test accuracy of the trained model");
  file.string("/whatif/solver", to_string(influence.ihvp.method), "inverse-Hessian-vector solver");
  file.scalar("/whatif/damping", result.damping, "1", "damping of the Hessian");
  file.scalar("/whatif/ihvp_relative_residual", result.s_test_report.relative_residual, "1",
              "relative residual of the s_test solve");
  file.attribute("/whatif/ihvp_relative_residual", "above_tolerance",
                 std::int64_t{result.s_test_above_tolerance ? 1 : 0});
  write_model_stationarity(file, "/whatif/model_gradient_norm", result.stationarity);
  file.dataset("/whatif/ihvp_iterations",
               std::vector<std::int64_t>{result.s_test_report.iterations},
               {{"solve"}, "count", "iterations of the s_test solve"});
  if (config.retrain) {
    file.dataset("/whatif/retrain_iterations",
                 std::vector<std::int64_t>{static_cast<std::int64_t>(result.retrain_iterations)},
                 {{"total"}, "count", "Newton steps over every retrain"});
    file.scalar("/whatif/retrain_worst_gradient_norm", result.worst_gradient_norm, "1",
                "largest final gradient norm of any retrain");
  }
  for (const auto& variant : result.variants)
    write_variant(file, influence, config, variant, result.eigenvalue_max);
  write_timing(file, config, result, training_seconds);
}

}  // namespace fluence
