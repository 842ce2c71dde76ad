#include "fluence/io/lia_output.hpp"

#include <cmath>

namespace fluence {

void write_lia_output(ResultsFile& file, const lia::LiaConfig& config,
                      const lia::LiaResult& result) {
  file.dataset("/lia/vote_sum", result.vote_sum);
  file.dataset("/lia/true_vote_sum", result.true_vote_sum);
  file.dataset("/lia/votes_cast", result.votes_cast);
  file.dataset("/lia/accepted", result.accepted);
  file.dataset("/lia/corrupted", result.corrupted);
  const auto P = result.corrupted.size();
  const auto C = static_cast<std::size_t>(result.classes);
  file.dataset("/lia/batch_labels", result.batch_labels, {P, C});
  file.dataset("/lia/validation_labels", result.validation_labels, {P, C});
  if (config.relevance_weighted()) {
    file.dataset("/lia/relevance/batch_histogram", result.batch_histogram, {P, C});
    file.dataset("/lia/relevance/validation_histogram", result.validation_histogram, {P, C});
    file.scalar("/lia/relevance/epsilon", config.relevance_epsilon);
  }
  file.scalar("/lia/threshold", result.threshold);
  file.scalar("/lia/recall", result.recall);
  file.scalar("/lia/precision", result.precision);
  file.scalar("/lia/accuracy", result.accuracy);
  file.scalar("/lia/epsilon_train", result.epsilon_train);
  file.scalar("/lia/epsilon_vote", result.epsilon_vote);
  file.scalar("/lia/noise_multiplier", result.noise_multiplier);
  file.scalar("/lia/vote_flip_probability", config.vote_flip_probability());
  file.scalar("/lia/m0_test_accuracy", result.m0_test_accuracy);
  file.scalar("/lia/overlapping_data", result.overlapping_data ? 1.0 : 0.0);
  if (!result.sign_checked.empty()) {
    file.scalar("/lia/sign_agreement", result.sign_agreement);
    file.dataset("/lia/sign_checked", result.sign_checked);
  }
  for (const auto& method : result.fl) {
    file.dataset("/lia/fl/" + method.method + "/test_accuracy", method.test_accuracy);
    file.attribute("/lia/fl/" + method.method, "clients",
                   static_cast<std::int64_t>(method.clients));
  }
  if (!result.minority.fractions.empty()) {
    file.dataset("/lia/minority/fractions", result.minority.fractions);
    file.dataset("/lia/minority/acceptance", result.minority.acceptance);
    file.dataset(
        "/lia/minority/vote_sum", result.minority.vote_sum,
        {result.minority.fractions.size(), static_cast<std::size_t>(config.minority_runs)});
  }
  file.scalar("/lia/timing/setup", result.time_setup);
  file.scalar("/lia/timing/contributors", result.time_training);
  file.scalar("/lia/timing/votes", result.time_votes);
  file.scalar("/lia/timing/fl", result.time_fl);
  file.scalar("/lia/timing/vote_gflops", result.vote_gflops);
}

}  // namespace fluence
