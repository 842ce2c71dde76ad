#include "fluence/io/privacy_output.hpp"

namespace fluence {

void write_privacy_output(ResultsFile& file, const PrivacyConfig& config,
                          const PrivacyHistory& history) {
  file.dataset("/privacy/epsilon", history.epsilon);
  file.scalar("/privacy/delta", history.delta);
  file.scalar("/privacy/noise_multiplier", history.noise_multiplier);
  file.scalar("/privacy/update_noise_multiplier", history.update_noise_multiplier);
  file.scalar("/privacy/count_noise", history.count_noise);
  file.scalar("/privacy/sampling_rate", config.sampling_rate);
  file.dataset("/privacy/best_order", history.best_order);
  file.dataset("/privacy/clip_norm", history.clip_norm);
  file.dataset("/privacy/sampled_private", history.sampled_private);
  file.dataset("/privacy/sampled_opt_out", history.sampled_opt_out);
  std::vector<std::int64_t> opt_out(history.opt_out_clients.begin(), history.opt_out_clients.end());
  file.dataset("/privacy/opt_out_clients", opt_out);
  file.string("/privacy/mode", config.mode == PrivacyMode::feo2 ? "feo2" : "dp-fedavg");
}

}  // namespace fluence
