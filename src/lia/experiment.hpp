#pragma once
// The shared state of one `fluence lia` run (src/lia only): the data, the participants' assignment,
// the frozen body, M0, the test slice and this rank's participants, and the stages that use them
// (set-up here, filtering in filtering.cpp, the FL comparison in fl_comparison.cpp). Participants
// live on ranks in contiguous blocks of VoteKernel::kValidatorBlock, so every per-participant
// quantity is computed by one rank from keyed streams, and every sum over participants is an
// exact integer sum or an ordered gather: the results are bitwise the same for any rank count.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fluence/data/source.hpp"
#include "fluence/fl/problem.hpp"
#include "fluence/lia/dp_sgd.hpp"
#include "fluence/lia/lia.hpp"
#include "fluence/lia/participants.hpp"
#include "fluence/model/network.hpp"
#include "fluence/model/softmax_regression.hpp"

namespace fluence::lia {

// The frozen body (seed §III-B: only the last layer moves): the encoded rows themselves
// (lia.body = "identity"), or a network trained on the warm-up rows with its last layer taken off
// ("mlp": one ReLU hidden layer of lia.hidden units; "network": the [model] section's mlp or cnn),
// its output followed by a constant-1 column for the last layer's bias when model.bias.
struct Body {
  Encoding encoding;
  std::unique_ptr<Network> network;
  std::vector<double> theta;  // the network's trained parameters
  bool bias_column = false;   // a network body's output gains a constant-1 column
  int width() const {
    return network ? network->head_width() + (bias_column ? 1 : 0) : encoding.width();
  }
  std::vector<double> features(const Table& source, const std::vector<std::int64_t>& rows) const;
};

// Test accuracy of theta on the test rows, each rank holding a slice; exact integer reduction.
struct TestSet {
  std::vector<double> x;
  std::vector<std::int32_t> y;
  long total = 0;
  double accuracy(const SoftmaxRegression& model, const std::vector<double>& theta,
                  Workspace& work) const;
};

// Participants' validation data on this rank, as features (their training batches are the
// federation's clients).
struct LocalData {
  int first = 0, last = 0;
  std::vector<double> validation_x;
  std::vector<std::int32_t> validation_y;
  std::vector<std::size_t> validation_begin;
};

struct Experiment {
  std::uint64_t seed = 0;
  bool progress = true;
  LiaConfig config;
  TrainTest data;
  ParticipantData assignment;
  Body body;
  int P = 0, C = 0, D = 0;
  std::size_t p = 0;  // C x D parameters of the last layer
  // The last layer's federation: its model (the softmax regression on the body's features) and
  // one client per participant hosted here (ids local.first .. local.last - 1, each holding its
  // training batch as features). The FL comparison trains it with fl/federation.
  FederatedProblem federated;
  std::vector<double> theta0, warmup_x;  // M0 and the warm-up rows as features
  std::vector<std::int32_t> warmup_y;
  TestSet test;
  LocalData local;
  DpSgdConfig dp;  // the contributors' DP-SGD, sigma calibrated to epsilon_train
  Workspace work;

  const SoftmaxRegression& model() const {
    return static_cast<const SoftmaxRegression&>(*federated.model);
  }
  /// Participant a's training batch (a hosted on this rank).
  const Client& participant(int a) const {
    return federated.clients[static_cast<std::size_t>(a - local.first)];
  }
};

std::vector<std::int32_t> labels_of(const Table& table, const std::vector<std::int64_t>& rows);

/// Data, assignment, body, M0, test slice, this rank's participants and the DP-SGD calibration;
/// fills the result's set-up fields. InputError for decks the methods cannot run.
Experiment set_up_experiment(const Deck& deck, bool progress, LiaResult& result);

/// A contributor's noisy last layer (Algorithm 1 lines 4-6): DP-SGD from M0 on its rows.
void train_layer(Experiment& e, const double* x, const std::int32_t* y, std::size_t rows,
                 Stream& stream, double* layer, DpSgdWorkspace& work);

/// The filtering stage: contributors, votes, the center's decision and metrics, and with their
/// keys the exact-influence sign check and the minority experiment (filtering.cpp).
void filter_contributors(Experiment& e, LiaResult& result);

/// T rounds of FL from M0 with `method` after filtering (fl_comparison.cpp).
FlMethodResult run_fl_method(Experiment& e, const std::string& method, const LiaResult& result);

}  // namespace fluence::lia
