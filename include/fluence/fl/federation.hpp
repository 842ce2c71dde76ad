#pragma once
// Federated training (seed 000 Eq. 1-2) and the federated primitives later commands reuse. Every
// member function is a collective; its result is identical on every rank and does not depend on the
// number of ranks (client and test-chunk contributions are reduced in id order).
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fluence/core/node_queue.hpp"
#include "fluence/core/quantized_sum.hpp"
#include "fluence/core/vector_ops.hpp"
#include "fluence/fl/aggregators.hpp"
#include "fluence/fl/local_objective.hpp"
#include "fluence/fl/problem.hpp"
#include "fluence/fl/round.hpp"

namespace fluence {

struct RoundMetrics {
  int round = 0;
  double train_loss = 0.0;  // h(theta) on the clients' randomized data (NaN when not evaluated)
  double test_loss = 0.0;
  double test_accuracy = 0.0;
  double wall_time = 0.0;  // seconds since training started
};

/// Where a restarted run continues: the rounds already done, the model after them and their
/// metrics (from a checkpoint).
struct TrainingResume {
  int completed_rounds = 0;
  std::vector<double> theta;
  std::vector<RoundMetrics> history;
  // The round's parts' state() by part ("aggregator", "server_optimizer", "client_update"); a
  // part missing here starts fresh.
  std::map<std::string, std::vector<double>> parts;
};

struct TrainingResult {
  bool stopped = false;  // after_round asked to stop (a signal): no polish, no final metrics
  std::vector<double> theta;
  std::vector<RoundMetrics> history;
  RoundMetrics final_metrics;  // at the returned theta (after any polish)
  double gradient_norm = 0.0;  // ||grad h(theta)||_2 at the returned theta
  int polish_steps = 0;
};

class Federation {
 public:
  explicit Federation(FederatedProblem& problem);

  std::size_t parameters() const { return problem_.model->parameters(); }

  /// h(theta) = sum_i n_i/n L_i(theta) + l2/2 ||theta||^2 (seed 000 Eq. 1 plus L2).
  double objective(const std::vector<double>& theta);
  /// grad h(theta).
  void gradient(const std::vector<double>& theta, std::vector<double>& out);
  /// Per local client, the softmax probabilities at one theta: a caller that multiplies by the
  /// Hessian at a fixed theta many times (a CG solve) keeps one, so every product after the first
  /// makes one pass over the data less. It holds no theta: the caller clears it when theta or the
  /// data change.
  struct HessianCache {
    std::vector<std::vector<double>> probabilities;
    bool filled = false;
    void clear() { filled = false; }
  };
  /// Hessian of h at theta applied to v; with a `cache`, the probabilities are taken from it (and
  /// computed into it when it is not filled).
  void hessian_vector(const std::vector<double>& theta, const double* v, double* out,
                      HessianCache* cache = nullptr);
  /// Diagonal of the Hessian of h at theta (the Jacobi preconditioner).
  void hessian_diagonal(const std::vector<double>& theta, std::vector<double>& out);
  /// The explicit p x p Hessian of h at theta, row-major (small p: p^2 doubles on every rank).
  void explicit_hessian(const std::vector<double>& theta, std::vector<double>& out);
  /// Mean loss and accuracy on the server's test set. `fast` (the per-round training curve) allows
  /// float logits on byte-coded test data (mean loss to about 1e-7 relative, the accuracy exact but
  /// for rows whose two best logits lie within about 1e-6) and a network's float evaluation (about
  /// 1e-6); the default is double throughout, as differences of test losses (influence, FLDP)
  /// need.
  std::pair<double, double> evaluate_test(const std::vector<double>& theta, bool fast = false);
  /// A network's test set in fixed chunks (TestShard::chunk_rows rows): loss and accuracy sums of
  /// one chunk, on any rank (every rank holds every test row).
  LossAndAccuracy test_chunk(std::size_t chunk, const std::vector<double>& theta, bool fast);
  /// Gradient of the mean test loss (no regularization): the server's side of s_test.
  void test_gradient(const std::vector<double>& theta, std::vector<double>& out);

  /// Leaves these clients out of every objective, gradient, Hessian and FedAvg round (exact
  /// retraining without them); an empty list restores the full federation. Every rank passes the
  /// same ids.
  void exclude_clients(const std::vector<int>& ids);
  /// out = sum over included clients, in client order, of what `contribution(local index, sum)`
  /// writes (out.size() values); excluded clients add zero. Collective, rank-count independent.
  void sum_over_clients(std::span<double> out,
                        const std::function<void(std::size_t, double*)>& contribution);
  /// Replaces the data term of a client hosted on this rank (index into problem.clients) by
  /// `objective` in every objective, gradient and Hessian, until cleared (nullptr). FedAvg rounds
  /// refuse to run while any client has one (they need rows to train on).
  void set_local_objective(std::size_t local_client, std::shared_ptr<LocalObjective> objective);
  void clear_local_objectives();
  LocalObjective* local_objective(std::size_t local_client) const {
    return objectives_[local_client].get();
  }
  /// n: training rows of the included clients.
  std::int64_t train_rows() const { return train_rows_; }
  bool client_included(int id) const { return included_[static_cast<std::size_t>(id)] != 0; }
  bool included(std::size_t local_client) const {
    return client_included(problem_.clients[local_client].id());
  }
  /// One federated round, the only round loop (fl/round.hpp's parts): every client of `sampler`'s
  /// cohort among the included ones trains locally from theta (by the client update rule of
  /// `config`, and SCAFFOLD's corrections inside train()) into `reduction`; after the ranks agree
  /// on the reduction's bound, theta += the reduction's step (theta unchanged for an empty
  /// cohort). FedAvg (seed 000 Eq. 2) is WeightedMeanReduction: theta <- theta + sum_S n_i
  /// (theta_i - theta) / sum_S n_i, summed exactly in fixed point so that the result does not
  /// depend on the rank count; in single precision, theta is rounded to float once for the round.
  /// `before_reduction` runs on every rank after its local training, before the first collective,
  /// with theta unchanged (the overlapped evaluation of train()). A diverged client (a non-finite
  /// update) leaves theta NaN.
  void round(int round, std::vector<double>& theta, const LocalTrainingConfig& config,
             Sampler& sampler, UpdateReduction& reduction,
             const std::function<void()>& before_reduction = {});

  /// Runs the configured rounds (and polish); `on_round` is called on every rank with each round's
  /// metrics. The round's parts come from `config` (fl/round.hpp: federation.client_sampling,
  /// federation.aggregator, federation.server_optimizer, federation.client_update); a
  /// `privatizer` (private training) replaces the sampler and the reduction;
  /// `after_round(round, theta, history)` runs last in each round (checkpoints) and returns true
  /// to stop there; `resume` continues a checkpointed run.
  ///
  /// A network's test evaluation overlaps the next round: round t's metrics are computed during
  /// round t + 1, by whichever ranks of a node finish their local training first (a
  /// NodeWorkQueue of test chunks), so that the ranks with fewer sampled clients evaluate more.
  /// The history after round t then ends at round t - 1 (also in checkpoints); the last round is
  /// evaluated after the loop. The metrics are the same bits as a separate evaluation.
  ///
  /// With `after_round`, a stop signal need not wait for the end of a FedAvg round (which can
  /// outlast a launcher's grace before SIGKILL): each rank gives the round up at its next client,
  /// the ranks agree in the round's reduction, and after_round(t - 1, ...) is called with the
  /// state after the last finished round (it sees the signal, writes that checkpoint and returns
  /// true).
  ///
  /// A round that leaves theta non-finite (a diverged client: a learning rate too large) throws a
  /// DivergenceError on every rank naming the round and the lowest diverged client.
  TrainingResult train(
      const FederationConfig& config, const std::function<void(const RoundMetrics&)>& on_round = {},
      Privatizer* privatizer = nullptr,
      const std::function<bool(int, const std::vector<double>&, const std::vector<RoundMetrics>&)>&
          after_round = {},
      const TrainingResume* resume = nullptr);

  FederatedProblem& problem() { return problem_; }
  /// The state of train()'s parts with state after the last finished round, by part
  /// ("aggregator", "server_optimizer", "client_update": SCAFFOLD's c and every c_i), for
  /// after_round's checkpoints (TrainingResume::parts takes it back); empty outside train().
  /// Collective (SCAFFOLD's c_i are gathered in client order).
  std::map<std::string, std::vector<double>> part_states() const;

 private:
  double inverse_n() const { return 1.0 / static_cast<double>(train_rows_); }
  // Trains the round's cohort among this rank's included clients from theta into the reduction's
  // slots (their local indices in chosen_). Under SCAFFOLD, each client trains with its
  // correction c - c_i, and its c_i+ is kept in control_buffer_ (chosen_.size() x p) with
  // max |c_i+ - c_i| in control_bound_. A diverged client's id goes to diverged_client_.
  void train_cohort(int round, const std::vector<double>& theta, const LocalTrainingConfig& config,
                    Sampler& sampler, UpdateReduction& reduction);
  // A stop signal inside train() gives up the round in progress (abandon_on_stop_).
  bool stop_requested() const;
  // Local client k's Hessian diagonal (p) and dense Hessian (p x p) of its data term, from its
  // replacing objective when it has one.
  void client_hessian_diagonal(std::size_t k, const std::vector<double>& theta, double* out);
  void client_hessian(std::size_t k, const std::vector<double>& theta, double* out);

  FederatedProblem& problem_;
  std::vector<char> included_;                               // per client id
  std::vector<std::shared_ptr<LocalObjective>> objectives_;  // per local client, usually null
  std::int64_t train_rows_ = 0;
  Workspace work_;
  std::vector<double> local_buffer_;
  // A network's chunked test evaluation: chunks taken from a node queue, results reduced.
  struct TestRows {
    const double* x;
    const std::int32_t* y;
    std::size_t count;
  };
  TestRows test_chunk_rows(std::size_t chunk);  // decoded into chunk_features_ when coded
  NodeWorkQueue& evaluation_queue();
  // With abandon_on_stop, a stop signal ends the evaluation early (its round is given up).
  void evaluate_taken_chunks(const std::vector<double>& theta, bool fast,
                             bool abandon_on_stop = false);
  std::pair<double, double> reduce_chunk_results();
  std::unique_ptr<NodeWorkQueue> evaluation_queue_;
  std::vector<double> chunk_results_, chunk_features_;
  std::vector<float> theta_single_;  // theta rounded to float, once a round
  std::vector<std::size_t> chosen_;  // the round's cohort on this rank (local indices)
  std::vector<double> step_;         // the round's step from its reduction
  // Inside train() with a checkpointing after_round: a stop signal gives up the round in
  // progress (at the next client, the overlapped evaluation at the next chunk), and every rank
  // agrees on it in the round's one reduction (round_abandoned_).
  bool abandon_on_stop_ = false, round_abandoned_ = false;
  // The lowest id of a client whose update was not finite in the last round (this rank's
  // until the round's reduction, then agreed), or kNoClient.
  static constexpr int kNoClient = std::numeric_limits<int>::max();
  int diverged_client_ = kNoClient;
  // train()'s aggregator (federation.aggregator), server optimizer (federation.server_optimizer)
  // and theta before the round.
  std::unique_ptr<Aggregator> aggregator_;
  std::unique_ptr<ServerOptimizer> server_optimizer_;
  std::vector<double> theta_before_;
  // train()'s SCAFFOLD control variates (federation.client_update = "scaffold"), or null; the
  // round's c_i+ until the round is kept, and the sum of the c_i+ - c_i.
  std::unique_ptr<ScaffoldControls> scaffold_;
  std::vector<double> control_buffer_, control_scratch_;
  double control_bound_ = 0.0;
  QuantizedSum control_sum_;
  // SCAFFOLD's server step after the round's reduction: c += (1/N) sum (c_i+ - c_i) and every
  // c_i <- c_i+ (collective).
  void advance_controls();
};

/// z = M^{-1} r for a symmetric positive definite M close to the Hessian. Every rank runs the same
/// CG, so M^{-1} r must be bitwise identical on every rank (a replicated factor applied by the same
/// single-threaded BLAS).
class InterruptibleNewton;  // core/newton.hpp
using NewtonPreconditioner = std::function<void(const double* r, double* z)>;

/// Federated Newton steps (core/newton.hpp: CG with options prefix "newton_" on the exact Hessian
/// products, a backtracking line search, Levenberg-Marquardt damping where a network's Hessian is
/// indefinite) until ||grad h|| <= tolerance. Returns the steps taken. CG is Jacobi-preconditioned
/// for the linear model unless `preconditioner` is given (fl/newton.hpp). With `stop`, a stop may
/// end it between steps and a restart continue it (core/newton.hpp; stop->stopped() after).
int newton_polish(Federation& federation, std::vector<double>& theta, double tolerance,
                  int max_steps, bool verbose = true,
                  const NewtonPreconditioner& preconditioner = {},
                  InterruptibleNewton* stop = nullptr);

/// Collective: direction = H(theta)^{-1} gradient by the polish's CG to relative residual `rtol`
/// (one Newton direction), or CG's iterate after `max_iterations` (> 0; a descent direction all
/// the same). Returns the CG iterations.
int newton_direction(Federation& federation, const std::vector<double>& theta,
                     std::vector<double> gradient, std::vector<double>& direction, double rtol,
                     const NewtonPreconditioner& preconditioner = {}, int max_iterations = 0);

}  // namespace fluence
