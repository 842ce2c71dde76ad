#pragma once
// A client owns its raw and randomized data (docs/architecture.md, "Privacy boundary"): nothing
// outside the client reads `original_*`; the server only ever receives the messages the protocol
// sends.
#include <cstdint>
#include <memory>
#include <vector>

#include "fluence/model/model.hpp"

namespace fluence {

/// A local update's size: ||d||^2 (eight lane sums added in a fixed order, so that the clipping
/// decision is the same on every rank) and max |d_i|; max_abs is +inf when d has a NaN or an
/// infinity (or is so large that ||d||^2 overflows): a diverged client.
struct UpdateSize {
  double squared_norm = 0.0, max_abs = 0.0;
};

// Filled in by FederationConfig::from_deck; the defaults are the declared keys'
// (register_federation_keys). lia sets its own epochs, batch and step (LiaConfig).
struct LocalTrainingConfig {
  int epochs{};
  int batch_size{};
  double learning_rate{};
  bool full_batch{};  // optimizer = "gd"
  // local_precision = "single": mini-batch SGD in float (train_round and train_update) where the
  // model can (Model::trains_single: a network always, the logistic model on byte-coded rows);
  // full-batch steps and Ditto's personal steps stay double.
  bool single_precision{};
  // FedProx's mu (federation.client_update = "fedprox", docs/math.md §8.6): every local step's
  // gradient gains mu (y - theta_t), theta_t the model the round starts from; 0 = plain SGD. Full
  // batch and single precision alike; Ditto's personal steps have their own lambda instead.
  double proximal_mu = 0.0;
  // Set by Federation::train when a stop signal may give up the round: local training then ends
  // at the next epoch once this rank has received one (the update is discarded with the round).
  bool abandon_on_stop = false;
};

class Client {
 public:
  Client(int id, std::vector<std::int64_t> rows, std::vector<std::int32_t> original_categorical,
         std::vector<std::int32_t> original_labels, std::vector<std::int32_t> categorical,
         std::vector<std::int32_t> labels, std::vector<double> features);

  int id() const { return id_; }
  std::size_t size() const { return rows_.size(); }
  /// Global training-row indices held by this client.
  const std::vector<std::int64_t>& rows() const { return rows_; }
  const std::vector<std::int32_t>& labels() const { return labels_; }
  const std::vector<std::int32_t>& categorical() const { return categorical_; }
  const std::vector<std::int32_t>& original_categorical() const { return original_categorical_; }
  const std::vector<std::int32_t>& original_labels() const { return original_labels_; }
  /// Encoded randomized features, size() x width.
  const double* features() const { return features_.data(); }
  /// The rows as local training reads them (with their codes when they have them).
  TrainingRows training_rows() const {
    return {features_.data(), labels_.data(), size(), codes_.empty() ? nullptr : codes_.data(),
            codes_.empty() ? nullptr : coding_.get()};
  }

  /// The same rows as 8-bit codes of `coding` (when the data allow: image pixels): local SGD then
  /// reads these, an eighth of the memory traffic of the doubles.
  void set_codes(std::vector<std::uint8_t> codes, std::shared_ptr<const ByteCoding> coding) {
    codes_ = std::move(codes);
    coding_ = std::move(coding);
  }

  /// Asks the memory system for the codes local training reads, without waiting: issued one
  /// client ahead, the fetch overlaps the current client's arithmetic (a client's codes are tens
  /// of KB; the doubles of a tabular client can be megabytes and are left alone).
  void prefetch() const;

  /// Local training from `theta` (in/out) for one round: seeded shuffles keyed by
  /// (seed, client, round, epoch), so the result does not depend on the hosting rank. With
  /// `start`, training begins from start and theta's contents are ignored: the same bits as
  /// copying start into theta first (byte-coded SGD reads start directly and skips the copy).
  /// With config.single_precision (and codes), the model is rounded to float, trained in float,
  /// and theta = start + (trained - rounded start), the difference taken exactly in double.
  /// With config.proximal_mu > 0, every step is pulled towards the starting model (FedProx); with
  /// a `correction` (p values), every step's gradient gains it (SCAFFOLD's c - c_i).
  void train_round(const Model& model, const LocalTrainingConfig& config, std::uint64_t seed,
                   int round, double* theta, Workspace& work, const double* start = nullptr,
                   const double* correction = nullptr);
  /// train_round from `start`, written as the update d = trained - start (`update`, p values) with
  /// its size, in one pass. In single precision `start_single` is start rounded to float (the
  /// caller rounds it once for all its clients of a round), training reads it directly, and
  /// d = trained - start_single exactly; without it, or without codes, the double path.
  UpdateSize train_update(const Model& model, const LocalTrainingConfig& config, std::uint64_t seed,
                          int round, double* update, Workspace& work, const double* start,
                          const float* start_single = nullptr, const double* correction = nullptr);
  /// The local SGD steps train_round takes: epochs x ceil(size / batch), or epochs full-batch
  /// (SCAFFOLD's K).
  int local_steps(const LocalTrainingConfig& config) const;
  /// Ditto's personal step (seed 004 Eq. 2): SGD on f(theta) + lambda/2 ||theta - center||^2 from
  /// `theta` (the client's persistent personal model, in/out), its own shuffle stream.
  void train_personal(const Model& model, const LocalTrainingConfig& config, std::uint64_t seed,
                      int round, double* theta, const double* center, double lambda,
                      Workspace& work);

  /// The client's own held-out test rows (partition.local_test_fraction; encoded, clean).
  void set_local_test(std::vector<double> features, std::vector<std::int32_t> labels) {
    local_test_features_ = std::move(features);
    local_test_labels_ = std::move(labels);
  }
  std::size_t local_test_size() const { return local_test_labels_.size(); }
  const double* local_test_features() const { return local_test_features_.data(); }
  const std::int32_t* local_test_labels() const { return local_test_labels_.data(); }

 private:
  int id_;
  std::vector<std::int64_t> rows_;
  std::vector<std::int32_t> original_categorical_, original_labels_;
  std::vector<std::int32_t> categorical_, labels_;
  std::vector<double> features_;
  std::vector<std::uint8_t> codes_;  // empty, or features_ as codes of *coding_
  std::shared_ptr<const ByteCoding> coding_;
  bool trains_single(const Model& model, const LocalTrainingConfig& config) const {
    return config.single_precision && !config.full_batch && config.epochs > 0 &&
           model.trains_single(training_rows());
  }
  // The float epochs from start_single into work.single_theta; `center` is the double model
  // start_single rounds (FedProx's, read through float).
  void train_single(const Model& model, const LocalTrainingConfig& config, std::uint64_t seed,
                    int round, Workspace& work, const float* start_single, const double* center,
                    const double* correction);
  std::vector<std::int64_t> order_;  // shuffle buffer
  std::vector<double> center_;       // FedProx's theta_t when train_round trains theta in place
  std::vector<double> local_test_features_;
  std::vector<std::int32_t> local_test_labels_;
};

}  // namespace fluence
