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

  file.dataset("/fldp/theta_estimate",
               case_rows(result, p,
                         [](const FldpCaseResult& c) -> const std::vector<double>& {
                           return c.theta_estimate;
                         }),
               {{"case", "parameter"}, "1", "influence estimate of the changed model"});
  file.dataset("/fldp/test_loss_estimate",
               per_case(result, [](const FldpCaseResult& c) { return c.test_loss_estimate; }),
               {{"case"}, "nat", "test loss of the estimate"});
  file.dataset("/fldp/test_accuracy_estimate",
               per_case(result, [](const FldpCaseResult& c) { return c.test_accuracy_estimate; }),
               {{"case"}, "1", "test accuracy of the estimate"});
  file.dataset("/fldp/time_estimate_s",
               per_case(result, [](const FldpCaseResult& c) { return c.time_estimate; }),
               {{"case"}, "s", "wall time of the estimate"});
  file.dataset("/fldp/mc_standard_error",
               per_case(result, [](const FldpCaseResult& c) { return c.mc_standard_error; }),
               {{"case"}, "1", "norm of the Monte-Carlo standard error of the estimate"});
  file.dataset(
      "/fldp/ihvp_iterations",
      per_case(result,
               [](const FldpCaseResult& c) { return static_cast<double>(c.ihvp_iterations); }),
      {{"case"}, "count", "iterations of the case's solves"});
  file.dataset("/fldp/ihvp_relative_residual",
               per_case(result, [](const FldpCaseResult& c) { return c.ihvp_residual; }),
               {{"case"}, "1", "largest relative residual of the case's solves"});

  if (config.newton_steps > 0) {
    const auto steps = static_cast<std::size_t>(config.newton_steps);
    file.dataset("/fldp/theta_newton",
                 case_rows(result, p,
                           [](const FldpCaseResult& c) -> const std::vector<double>& {
                             return c.theta_newton;
                           }),
                 {{"case", "parameter"}, "1", "estimate after the Newton steps"});
    if (config.retrain) {
      file.dimension("/fldp/newton_step", steps);
      file.dataset(
          "/fldp/newton_ed_expected",
          case_rows(result, steps,
                    [](const FldpCaseResult& c) -> const std::vector<double>& {
                      return c.newton_ed_expected;
                    }),
          {{"case", "newton_step"}, "1", "distance to the expected retrain after the step"});
    }
  }
  if (!config.retrain) return;
  file.dataset("/fldp/theta_expected",
               case_rows(result, p,
                         [](const FldpCaseResult& c) -> const std::vector<double>& {
                           return c.theta_expected;
                         }),
               {{"case", "parameter"}, "1", "minimizer of the expected changed objective"});
  file.dataset("/fldp/test_loss_expected",
               per_case(result, [](const FldpCaseResult& c) { return c.test_loss_expected; }),
               {{"case"}, "nat", "test loss of the expected retrain"});
  file.dataset("/fldp/test_accuracy_expected",
               per_case(result, [](const FldpCaseResult& c) { return c.test_accuracy_expected; }),
               {{"case"}, "1", "test accuracy of the expected retrain"});
  file.dataset("/fldp/ald_expected",
               per_case(result, [](const FldpCaseResult& c) { return c.ald_expected; }),
               {{"case"}, "nat", "ALD of the estimate against the expected retrain"});
  file.dataset("/fldp/aad_expected",
               per_case(result, [](const FldpCaseResult& c) { return c.aad_expected; }),
               {{"case"}, "1", "AAD of the estimate against the expected retrain"});
  file.dataset("/fldp/ed_expected",
               per_case(result, [](const FldpCaseResult& c) { return c.ed_expected; }),
               {{"case"}, "1", "ED of the estimate against the expected retrain"});
  if (config.retrain_seeds == 0) return;
  const auto draws = static_cast<std::size_t>(config.retrain_seeds);
  file.dimension("/fldp/draw", draws);
  const auto per_draw = [&](const char* path, auto member, const char* units,
                            const char* long_name) {
    file.dataset(
        path,
        case_rows(result, draws,
                  [&](const FldpCaseResult& c) -> const std::vector<double>& { return c.*member; }),
        {{"case", "draw"}, units, long_name});
  };
  per_draw("/fldp/ald", &FldpCaseResult::ald, "nat", "ALD of the estimate against the retrain");
  per_draw("/fldp/aad", &FldpCaseResult::aad, "1", "AAD of the estimate against the retrain");
  per_draw("/fldp/ed", &FldpCaseResult::ed, "1", "ED of the estimate against the retrain");
  per_draw("/fldp/test_loss_retrain", &FldpCaseResult::test_loss_retrain, "nat",
           "test loss of the re-randomized retrain");
  per_draw("/fldp/test_accuracy_retrain", &FldpCaseResult::test_accuracy_retrain, "1",
           "test accuracy of the re-randomized retrain");
  file.dataset("/fldp/time_retrain_s",
               per_case(result, [](const FldpCaseResult& c) { return c.time_retrain; }),
               {{"case"}, "s", "mean wall time of one retrain"});
}

}  // namespace fluence
