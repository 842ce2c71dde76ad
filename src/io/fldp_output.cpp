#include "fluence/io/fldp_output.hpp"

#include "fluence/io/influence_output.hpp"

#include <cmath>

namespace fluence {

namespace {

// One value per case, taken from each case result.
template <class Field>
std::vector<double> per_case(const FldpResult& result, Field field) {
  std::vector<double> values;
  for (const auto& c : result.cases) values.push_back(field(c));
  return values;
}

// Cases x width, each case's row from `field` (NaN-padded when shorter).
template <class Field>
std::vector<double> case_rows(const FldpResult& result, std::size_t width, Field field) {
  std::vector<double> values;
  for (const auto& c : result.cases) {
    const std::vector<double>& row = field(c);
    for (std::size_t j = 0; j < width; ++j)
      values.push_back(j < row.size() ? row[j] : std::nan(""));
  }
  return values;
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
  file.dataset("/fldp/case_eps_from", eps_from);
  file.dataset("/fldp/case_eps_to", eps_to);
  file.dataset("/fldp/case_clients", mask, {cases, clients});
  file.dataset("/fldp/case_remove", remove);
  file.attribute("/fldp", "case_description", descriptions);
  file.string("/fldp/hessian_scope", to_string(influence.scope));
  file.string("/fldp/hessian_block",
              config.hessian_block == HessianBlock::first ? "first" : "full");
  file.string("/fldp/solver", to_string(influence.ihvp.method));
  file.scalar("/fldp/damping", result.damping);
  file.scalar("/fldp/base_test_loss", result.base_test_loss);
  file.scalar("/fldp/base_test_accuracy", result.base_test_accuracy);
  file.scalar("/fldp/time_setup_s", result.time_setup);
  write_hessian_spectrum(file, result.spectrum);

  file.dataset("/fldp/theta_estimate",
               case_rows(result, p,
                         [](const FldpCaseResult& c) -> const std::vector<double>& {
                           return c.theta_estimate;
                         }),
               {cases, p});
  file.dataset("/fldp/test_loss_estimate",
               per_case(result, [](const FldpCaseResult& c) { return c.test_loss_estimate; }));
  file.dataset("/fldp/test_accuracy_estimate",
               per_case(result, [](const FldpCaseResult& c) { return c.test_accuracy_estimate; }));
  file.dataset("/fldp/time_estimate_s",
               per_case(result, [](const FldpCaseResult& c) { return c.time_estimate; }));
  file.dataset("/fldp/mc_standard_error",
               per_case(result, [](const FldpCaseResult& c) { return c.mc_standard_error; }));
  file.dataset("/fldp/ihvp_iterations", per_case(result, [](const FldpCaseResult& c) {
                 return static_cast<double>(c.ihvp_iterations);
               }));
  file.dataset("/fldp/ihvp_relative_residual",
               per_case(result, [](const FldpCaseResult& c) { return c.ihvp_residual; }));

  if (config.newton_steps > 0) {
    const auto steps = static_cast<std::size_t>(config.newton_steps);
    file.dataset("/fldp/theta_newton",
                 case_rows(result, p,
                           [](const FldpCaseResult& c) -> const std::vector<double>& {
                             return c.theta_newton;
                           }),
                 {cases, p});
    if (config.retrain)
      file.dataset("/fldp/newton_ed_expected",
                   case_rows(result, steps,
                             [](const FldpCaseResult& c) -> const std::vector<double>& {
                               return c.newton_ed_expected;
                             }),
                   {cases, steps});
  }
  if (!config.retrain) return;
  file.dataset("/fldp/theta_expected",
               case_rows(result, p,
                         [](const FldpCaseResult& c) -> const std::vector<double>& {
                           return c.theta_expected;
                         }),
               {cases, p});
  file.dataset("/fldp/test_loss_expected",
               per_case(result, [](const FldpCaseResult& c) { return c.test_loss_expected; }));
  file.dataset("/fldp/test_accuracy_expected",
               per_case(result, [](const FldpCaseResult& c) { return c.test_accuracy_expected; }));
  file.dataset("/fldp/ald_expected",
               per_case(result, [](const FldpCaseResult& c) { return c.ald_expected; }));
  file.dataset("/fldp/aad_expected",
               per_case(result, [](const FldpCaseResult& c) { return c.aad_expected; }));
  file.dataset("/fldp/ed_expected",
               per_case(result, [](const FldpCaseResult& c) { return c.ed_expected; }));
  if (config.retrain_seeds == 0) return;
  const auto draws = static_cast<std::size_t>(config.retrain_seeds);
  const auto per_draw = [&](const char* path, auto member) {
    file.dataset(
        path,
        case_rows(result, draws,
                  [&](const FldpCaseResult& c) -> const std::vector<double>& { return c.*member; }),
        {cases, draws});
  };
  per_draw("/fldp/ald", &FldpCaseResult::ald);
  per_draw("/fldp/aad", &FldpCaseResult::aad);
  per_draw("/fldp/ed", &FldpCaseResult::ed);
  per_draw("/fldp/test_loss_retrain", &FldpCaseResult::test_loss_retrain);
  per_draw("/fldp/test_accuracy_retrain", &FldpCaseResult::test_accuracy_retrain);
  file.dataset("/fldp/time_retrain_s",
               per_case(result, [](const FldpCaseResult& c) { return c.time_retrain; }));
}

}  // namespace fluence
