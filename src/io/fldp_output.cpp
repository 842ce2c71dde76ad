#include "fluence/io/fldp_output.hpp"

#include "fluence/io/influence_output.hpp"

#include <cmath>

namespace fluence {

namespace {

// One value per case: the member of each case result.
template <class Value>
std::vector<double> per_case(const FldpResult& result, Value FldpCaseResult::*member) {
  std::vector<double> values;
  for (const auto& c : result.cases) values.push_back(static_cast<double>(c.*member));
  return values;
}

// Cases x width, each case's row the member of its result (NaN-padded when shorter).
std::vector<double> case_rows(const FldpResult& result, std::size_t width,
                              std::vector<double> FldpCaseResult::*member) {
  std::vector<double> values;
  for (const auto& c : result.cases) {
    const std::vector<double>& row = c.*member;
    for (std::size_t j = 0; j < width; ++j)
      values.push_back(j < row.size() ? row[j] : std::nan(""));
  }
  return values;
}

// A dataset of /fldp with a value per case (or a row per case): path, the case result's member,
// units, long name (docs/outputs.md).
template <class Member>
struct CaseDataset {
  const char* path;
  Member FldpCaseResult::*member;
  const char* units;
  const char* long_name;
};
using CaseValue = CaseDataset<double>;
using CaseRow = CaseDataset<std::vector<double>>;

const CaseValue kEstimateValues[] = {
    {"/fldp/test_loss_estimate", &FldpCaseResult::test_loss_estimate, "nat",
     "test loss of the estimate"},
    {"/fldp/test_accuracy_estimate", &FldpCaseResult::test_accuracy_estimate, "1",
     "test accuracy of the estimate"},
    {"/fldp/time_estimate_s", &FldpCaseResult::time_estimate, "s", "wall time of the estimate"},
    {"/fldp/mc_standard_error", &FldpCaseResult::mc_standard_error, "1",
     "norm of the Monte-Carlo standard error of the estimate"},
    {"/fldp/ihvp_relative_residual", &FldpCaseResult::ihvp_residual, "1",
     "largest relative residual of the case's solves"}};
const CaseValue kExpectedValues[] = {
    {"/fldp/test_loss_expected", &FldpCaseResult::test_loss_expected, "nat",
     "test loss of the expected retrain"},
    {"/fldp/test_accuracy_expected", &FldpCaseResult::test_accuracy_expected, "1",
     "test accuracy of the expected retrain"},
    {"/fldp/ald_expected", &FldpCaseResult::ald_expected, "nat",
     "ALD of the estimate against the expected retrain"},
    {"/fldp/aad_expected", &FldpCaseResult::aad_expected, "1",
     "AAD of the estimate against the expected retrain"},
    {"/fldp/ed_expected", &FldpCaseResult::ed_expected, "1",
     "ED of the estimate against the expected retrain"}};
const CaseRow kDrawRows[] = {
    {"/fldp/ald", &FldpCaseResult::ald, "nat", "ALD of the estimate against the retrain"},
    {"/fldp/aad", &FldpCaseResult::aad, "1", "AAD of the estimate against the retrain"},
    {"/fldp/ed", &FldpCaseResult::ed, "1", "ED of the estimate against the retrain"},
    {"/fldp/test_loss_retrain", &FldpCaseResult::test_loss_retrain, "nat",
     "test loss of the re-randomized retrain"},
    {"/fldp/test_accuracy_retrain", &FldpCaseResult::test_accuracy_retrain, "1",
     "test accuracy of the re-randomized retrain"}};

template <std::size_t N>
void write_case_values(ResultsFile& file, const FldpResult& result,
                       const CaseValue (&datasets)[N]) {
  for (const CaseValue& d : datasets)
    file.dataset(d.path, per_case(result, d.member), {{"case"}, d.units, d.long_name});
}

// A row per case along `dimension` (parameter, newton_step or draw) of `width` values.
void write_case_row(ResultsFile& file, const FldpResult& result, const CaseRow& d,
                    const std::string& dimension, std::size_t width) {
  file.dataset(d.path, case_rows(result, width, d.member),
               {{"case", dimension}, d.units, d.long_name});
}

}  // namespace

void write_fldp_output(ResultsFile& file, const FederatedProblem& problem,
                       const InfluenceConfig& influence, const FldpConfig& config,
                       const FldpResult& result) {
  const std::size_t cases = config.cases.size();
  const std::size_t p = problem.model->parameters();
  const std::size_t clients = problem.client_rows.size();
  std::vector<double> eps_from, eps_to;
  std::vector<std::int64_t> mask(cases * clients, 0), remove;
  std::vector<std::string> descriptions;
  for (std::size_t c = 0; c < cases; ++c) {
    const auto& fldp_case = config.cases[c];
    eps_from.push_back(fldp_case.eps_from);
    eps_to.push_back(fldp_case.eps_to);
    remove.push_back(fldp_case.remove ? 1 : 0);
    for (const auto& change : fldp_case.changes) mask[c * clients + change.client] = 1;
    descriptions.push_back(fldp_case.description);
  }
  file.dimension("/fldp/case", cases);
  file.dimension("/fldp/client", clients);
  file.dimension("/fldp/parameter", p);
  file.dataset("/fldp/case_eps_from", eps_from,
               {{"case"}, "1", "changed attributes' epsilon before the change"});
  file.dataset("/fldp/case_eps_to", eps_to,
               {{"case"}, "1", "changed attributes' epsilon after the change"});
  file.dataset("/fldp/case_clients", mask,
               {{"case", "client"}, "1", "1 for the clients that change in the case"});
  file.dataset("/fldp/case_remove", remove, {{"case"}, "1", "1 when some client leaves"});
  file.strings("/fldp/case_description", descriptions, "case", "what changes in the case");
  file.attribute("/fldp", "case_description", descriptions);
  file.string("/fldp/hessian_scope", to_string(influence.scope), "Hessian of the estimate");
  file.string("/fldp/hessian_block", config.hessian_block == HessianBlock::first ? "first" : "full",
              "Hessian block of the estimate");
  file.string("/fldp/solver", to_string(influence.ihvp.method), "inverse-Hessian-vector solver");
  file.scalar("/fldp/damping", result.damping, "1", "damping of the Hessian solves");
  file.scalar("/fldp/base_test_loss", result.base_test_loss, "nat",
              "test loss of the trained model");
  file.scalar("/fldp/base_test_accuracy", result.base_test_accuracy, "1",
              "test accuracy of the trained model");
  file.scalar("/fldp/time_setup_s", result.time_setup, "s", "wall time of the shared set-up");
  write_hessian_spectrum(file, result.spectrum);

  write_case_row(file, result,
                 {"/fldp/theta_estimate", &FldpCaseResult::theta_estimate, "1",
                  "influence estimate of the changed model"},
                 "parameter", p);
  write_case_values(file, result, kEstimateValues);
  file.dataset("/fldp/ihvp_iterations", per_case(result, &FldpCaseResult::ihvp_iterations),
               {{"case"}, "count", "iterations of the case's solves"});
  std::vector<std::int64_t> above;
  for (const auto& c : result.cases) above.push_back(c.residual_above_tolerance ? 1 : 0);
  file.dataset("/fldp/ihvp_residual_above_tolerance", above,
               {{"case"}, "1", "1 when a solve of the case ended above influence.rtol (cg)"});
  write_model_stationarity(file, "/fldp/model_gradient_norm", result.stationarity);

  if (config.newton_steps > 0) {
    const auto steps = static_cast<std::size_t>(config.newton_steps);
    write_case_row(file, result,
                   {"/fldp/theta_newton", &FldpCaseResult::theta_newton, "1",
                    "estimate after the Newton steps"},
                   "parameter", p);
    file.dimension("/fldp/newton_step", steps);
    write_case_row(file, result,
                   {"/fldp/time_newton_s", &FldpCaseResult::newton_time, "s",
                    "wall time of the estimate refined up to the step"},
                   "newton_step", steps);
    if (config.retrain) {
      write_case_row(file, result,
                     {"/fldp/newton_ed_expected", &FldpCaseResult::newton_ed_expected, "1",
                      "distance to the expected retrain after the step"},
                     "newton_step", steps);
    }
  }
  if (!config.retrain) return;
  write_case_row(file, result,
                 {"/fldp/theta_expected", &FldpCaseResult::theta_expected, "1",
                  "minimizer of the expected changed objective"},
                 "parameter", p);
  write_case_values(file, result, kExpectedValues);
  // Whether each retrain stands for the changed model's minimizer (docs/outputs.md).
  std::vector<std::int64_t> converged, saddle;
  for (const auto& c : result.cases) {
    converged.push_back(c.expected_converged ? 1 : 0);
    saddle.push_back(c.expected_saddle ? 1 : 0);
  }
  file.dataset("/fldp/expected_retrain_gradient_norm",
               per_case(result, &FldpCaseResult::expected_gradient_norm),
               {{"case"}, "1", "norm of the changed objective's gradient at the expected retrain"});
  file.dataset("/fldp/expected_retrain_converged", converged,
               {{"case"}, "1", "1 when the expected retrain reached federation.tolerance"});
  if (influence.spectrum) {
    file.dataset("/fldp/expected_retrain_min_eigenvalue",
                 per_case(result, &FldpCaseResult::expected_min_eigenvalue),
                 {{"case"}, "1", "smallest Hessian eigenvalue at the expected retrain"});
    file.dataset("/fldp/expected_retrain_saddle", saddle,
                 {{"case"}, "1", "1 when the expected retrain stopped at a saddle point"});
  }
  if (config.retrain_seeds == 0) return;
  const auto draws = static_cast<std::size_t>(config.retrain_seeds);
  file.dimension("/fldp/draw", draws);
  for (const CaseRow& d : kDrawRows) write_case_row(file, result, d, "draw", draws);
  const auto flag_rows = [&](std::vector<char> FldpCaseResult::*member) {
    std::vector<std::int64_t> values;
    for (const auto& c : result.cases)
      for (std::size_t d = 0; d < draws; ++d)
        values.push_back(d < (c.*member).size() ? (c.*member)[d] : 0);
    return values;
  };
  write_case_row(file, result,
                 {"/fldp/retrain_gradient_norm", &FldpCaseResult::retrain_gradient_norm, "1",
                  "norm of the re-randomized objective's gradient at the retrain"},
                 "draw", draws);
  file.dataset("/fldp/retrain_converged", flag_rows(&FldpCaseResult::retrain_converged),
               {{"case", "draw"}, "1", "1 when the retrain reached federation.tolerance"});
  if (influence.spectrum) {
    write_case_row(file, result,
                   {"/fldp/retrain_min_eigenvalue", &FldpCaseResult::retrain_min_eigenvalue, "1",
                    "smallest Hessian eigenvalue at the retrain"},
                   "draw", draws);
    file.dataset("/fldp/retrain_saddle", flag_rows(&FldpCaseResult::retrain_saddle),
                 {{"case", "draw"}, "1", "1 when the retrain stopped at a saddle point"});
  }
  file.dataset("/fldp/time_retrain_s", per_case(result, &FldpCaseResult::time_retrain),
               {{"case"}, "s", "mean wall time of one retrain"});
}

}  // namespace fluence
