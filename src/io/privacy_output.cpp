#include "fluence/io/privacy_output.hpp"

#include <map>
#include <numeric>

namespace fluence {

namespace {
// The rounds 1..T as the coordinate of a group's per-round series.
void write_rounds(ResultsFile& file, const std::string& group, std::size_t rounds) {
  std::vector<std::int64_t> round(rounds);
  std::iota(round.begin(), round.end(), 1);
  file.coordinate(group + "/round", round, "1", "federated round");
}

const std::map<std::string, std::string>& feo2_long_names() {
  static const std::map<std::string, std::string> names{
      {"acc_g", "global model accuracy on the server's test set"},
      {"acc_g_p", "global model accuracy on the private clients' local test data"},
      {"acc_g_np", "global model accuracy on the opt-out clients' local test data"},
      {"acc_l_p", "personal models' accuracy on the private clients' local test data"},
      {"acc_l_np", "personal models' accuracy on the opt-out clients' local test data"},
      {"var_g_p", "variance across private clients of the global model's accuracy"},
      {"var_g_np", "variance across opt-out clients of the global model's accuracy"},
      {"var_l_p", "variance across private clients of the personal models' accuracy"},
      {"var_l_np", "variance across opt-out clients of the personal models' accuracy"}};
  return names;
}
}  // namespace

void write_privacy_output(ResultsFile& file, const PrivacyConfig& config,
                          const PrivacyHistory& history) {
  write_rounds(file, "/privacy", history.epsilon.size());
  file.dataset("/privacy/epsilon", history.epsilon,
               {{"round"}, "1", "differential privacy epsilon after the rounds so far"});
  file.scalar("/privacy/delta", history.delta, "1", "differential privacy delta");
  file.scalar("/privacy/noise_multiplier", history.noise_multiplier, "1",
              "overall noise multiplier z");
  file.scalar("/privacy/update_noise_multiplier", history.update_noise_multiplier, "1",
              "noise multiplier of the clipped updates");
  file.scalar("/privacy/count_noise", history.count_noise, "1",
              "noise multiplier of the unclipped-count estimate");
  file.scalar("/privacy/sampling_rate", config.sampling_rate, "1", "client sampling rate q");
  file.dataset("/privacy/best_order", history.best_order,
               {{"round"}, "1", "Rényi DP order attaining epsilon (NaN for other accountants)"});
  if (!history.client_epsilon.empty()) {
    std::vector<std::int64_t> ids(history.client_epsilon.size());
    std::iota(ids.begin(), ids.end(), 0);
    file.coordinate("/privacy/client", ids, "1", "client id");
    file.dataset("/privacy/client_epsilon", history.client_epsilon,
                 {{"client"},
                  "1",
                  "each client's epsilon at /privacy/delta after the last round (inf: opted out)"});
  }
  file.string("/privacy/accountant", history.accountants.front().name,
              "accountant of /privacy/epsilon");
  for (const AccountantSeries& series : history.accountants) {
    const std::string group = "/privacy/accountants/" + series.name;
    file.dataset(group + "/epsilon", series.epsilon,
                 {{"round"}, "1", "epsilon after the rounds so far, by this accountant"});
    file.dataset(group + "/epsilon_lower", series.lower,
                 {{"round"}, "1", "lower end of the accountant's epsilon bracket (0 = none)"});
    file.dataset(group + "/epsilon_upper", series.upper,
                 {{"round"}, "1", "upper end of the accountant's epsilon bracket"});
  }
  file.dataset("/privacy/clip_norm", history.clip_norm,
               {{"round"}, "1", "clipping norm of the round's updates"});
  file.dataset("/privacy/sampled_private", history.sampled_private,
               {{"round"}, "count", "private clients sampled in the round"});
  file.dataset("/privacy/sampled_opt_out", history.sampled_opt_out,
               {{"round"}, "count", "opt-out clients sampled in the round"});
  std::vector<std::int64_t> opt_out(history.opt_out_clients.begin(), history.opt_out_clients.end());
  file.dimension("/privacy/opt_out_client", opt_out.size());
  file.dataset("/privacy/opt_out_clients", opt_out,
               {{"opt_out_client"}, "1", "ids of the clients that opted out"});
  file.string("/privacy/mode", config.mode == PrivacyMode::feo2 ? "feo2" : "dp-fedavg",
              "private training algorithm");
}

void write_feo2_output(ResultsFile& file, const Feo2Metrics& m) {
  write_rounds(file, "/feo2", m.acc_g.size());
  Feo2Metrics::for_each(m, [&](const char* name, const std::vector<double>& series) {
    file.dataset(std::string("/feo2/") + name, series,
                 {{"round"}, "1", feo2_long_names().at(name)});
  });
  std::vector<double> delta_g, delta_l;  // opt-out minus private (seed 004 Tables 1-2)
  for (std::size_t t = 0; t < m.acc_g.size(); ++t) {
    delta_g.push_back(m.acc_g_np[t] - m.acc_g_p[t]);
    delta_l.push_back(m.acc_l_np[t] - m.acc_l_p[t]);
  }
  file.dataset("/feo2/delta_g", delta_g,
               {{"round"}, "1", "global model accuracy, opt-out minus private clients"});
  file.dataset("/feo2/delta_l", delta_l,
               {{"round"}, "1", "personal models' accuracy, opt-out minus private clients"});
}

}  // namespace fluence
