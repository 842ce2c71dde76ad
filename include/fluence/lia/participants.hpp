#pragma once
// Who holds which data in a LIA experiment (seed 002 §IV "Setup"): the center's warm-up rows, each
// participant's training batch and disjoint validation set with a Dirichlet(alpha) label mix, and
// the corrupted participants' labels. Identical on every rank; independent of the rank count.
#include <cstdint>
#include <vector>

#include "fluence/data/dataset.hpp"

namespace fluence::lia {

struct LiaConfig;

struct ParticipantData {
  std::vector<std::int64_t> warmup;  // rows of the training table
  // The public split the body is trained on (lia.public_fraction; empty when 0): held by no
  // participant and disjoint from the warm-up, as the seed's ImageNet pretraining is disjoint
  // from CIFAR-10 (seed 002 Sec. VIII).
  std::vector<std::int64_t> public_rows;
  std::vector<std::vector<std::int64_t>> train;        // per participant: its batch's rows
  std::vector<std::vector<std::int32_t>> train_label;  // per participant: labels after corruption
  std::vector<std::vector<std::int64_t>> validation;   // per participant: its validation rows
  std::vector<std::int64_t> corrupted;                 // participant ids, ascending
  std::vector<std::int32_t> label_map;                 // label_shift: true label -> reported label
  // True when participants x (train + validation) exceeds the rows left after the warm-up, so
  // each participant draws its sets independently (disjoint within, overlapping across).
  bool overlapping = false;
};

/// The assignment for `config` on `train` (rows of class `excluded_class` are left out of the
/// participants' data when it is >= 0: the minority experiment's validators lack that class).
ParticipantData assign_participants(const Table& train, const LiaConfig& config, std::uint64_t seed,
                                    int excluded_class = -1);

/// The newcomer of the minority experiment (seed §IV-E): `train_size` rows, a share `fraction` of
/// them from `minority_class`, the rest drawn with a Dirichlet(alpha) mix over the other classes;
/// drawn from all training rows except the warm-up (overlap with participants is allowed). `run`
/// keys the draw.
std::vector<std::int64_t> minority_batch(const Table& train, const ParticipantData& data,
                                         const LiaConfig& config, double fraction,
                                         std::uint64_t seed, std::uint64_t run);

}  // namespace fluence::lia
