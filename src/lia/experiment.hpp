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

#include "fluence/core/memory.hpp"
#include "fluence/data/source.hpp"
#include "fluence/fl/problem.hpp"
#include "fluence/lia/dp_sgd.hpp"
#include "fluence/lia/lia.hpp"
#include "fluence/lia/participants.hpp"
#include "fluence/lia/votes.hpp"
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
  std::vector<double> theta;   // the network's trained parameters
  bool bias_column = false;    // a network body's output gains a constant-1 column
  std::vector<double> center;  // subtracted from the network's outputs (empty: none)
  int width() const {
    return network ? network->head_width() + (bias_column ? 1 : 0) : encoding.width();
  }
  std::vector<double> features(const Table& source, const std::vector<std::int64_t>& rows) const;
  // Sets `center` to the mean network output over `rows` (in row order: the same bits on every
  // rank), so that features() of those rows average to 0 in every column but the bias column.
  void center_on(const Table& source, const std::vector<std::int64_t>& rows);
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
  // Votes each local validator has cast so far, per validation subset (owned x
  // lia.validation_subsets): the "disjoint" split deals the next votes after them, and the
  // validators' accounting composes over them.
  std::vector<std::int64_t> subset_votes;
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

/// What the votes surely hold on each rank once the head's `parameters` are known (issue 41;
/// core/memory.hpp): every contributor's trained layer (all-gathered: P x p on every rank) and the
/// rank's validators' loss differences; set_up_experiment checks it before the layers are trained.
std::vector<MemoryTerm> lia_working_memory(const LiaConfig& config, int participants,
                                           std::size_t parameters);

/// A contributor's noisy last layer (Algorithm 1 lines 4-6): DP-SGD from `start` (C x D: M0, or
/// the round's global model) on its rows.
void train_layer(Experiment& e, const double* start, const double* x, const std::int32_t* y,
                 std::size_t rows, Stream& stream, double* layer, DpSgdWorkspace& work);

/// What each local validator compares its loss differences with (filtering.cpp, vote_baselines):
/// one value per validator and group (one group, or one per subset with the "disjoint" split).
struct Baselines {
  int groups = 1;
  std::vector<double> value;  // local validators x groups
  /// The baseline of local validator `b` for the pair at index `pair` of `pair_subset`.
  double of(int b, const std::vector<std::uint8_t>& pair_subset, std::size_t pair) const {
    return value[static_cast<std::size_t>(b) * groups + (groups > 1 ? pair_subset[pair] : 0)];
  }
};

/// One vote on every contributor and the center's decision (Algorithm 1 lines 7-14).
struct VoteRound {
  std::vector<double> differences;  // local validators x P
  Baselines baselines;
  std::vector<double> vote_sum, true_vote_sum;
  std::vector<std::int64_t> votes_cast, accepted;
  double threshold = 0.0, recall = 0.0, precision = 0.0, accuracy = 0.0;
};

/// Every contributor's DP-SGD layer from `base`, gathered (P x p); `round_key` keys the streams
/// (0: the filtering stage, which is also the first round of lia.mode = "per_round").
std::vector<double> contributor_layers(Experiment& e, const std::vector<double>& base,
                                       std::uint64_t round_key);
/// The relevance weights of the local validators' votes (empty without lia.relevance).
std::vector<std::int64_t> relevance_vote_weights(const Experiment& e, const LiaResult& result);
/// The validators' votes on `layers` against `base` (the model the contributors started from),
/// the threshold, the decisions and their metrics against `corrupted`; counts every vote in
/// e.local.subset_votes.
VoteRound vote_on_contributors(Experiment& e, VoteKernel& kernel, const std::vector<double>& base,
                               const std::vector<double>& layers, std::uint64_t round_key,
                               const std::vector<std::int64_t>& weights,
                               const std::vector<std::int64_t>& corrupted);
/// e.local.subset_votes of every validator (P x lia.validation_subsets).
std::vector<double> gathered_subset_votes(const Experiment& e);

/// The filtering stage: contributors, votes, the center's decision and metrics, and with their
/// keys the exact-influence sign check and the minority experiment (filtering.cpp).
void filter_contributors(Experiment& e, LiaResult& result);

/// T rounds of FL from M0 with `method` after filtering (fl_comparison.cpp).
FlMethodResult run_fl_method(Experiment& e, const std::string& method, const LiaResult& result);

/// lia.mode = "per_round" (seed 003 Algorithm 1, per_round.cpp): T rounds of FL from M0 in which
/// every round's contributors are voted on with the current global model and only the accepted
/// ones are aggregated; the filtering stage's decision (already in `result`) is round 1's.
void run_per_round(Experiment& e, LiaResult& result);

}  // namespace fluence::lia
