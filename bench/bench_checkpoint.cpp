// Checkpoint overhead (issue 6): what one checkpoint of `fluence train` costs next to one training
// round, for a 1,000-client federation of multinomial logistic regression on Fashion-MNIST
// (10 classes x 785 = 7,850 parameters, as inputs/bench_feo2.toml and
// inputs/feo2_fashion_mnist.toml with 1,000 clients). Two cases:
//   light: FedAvg, every client trains every round; the checkpoint holds theta and the history;
//   heavy: FeO2 + Ditto, 5% of the clients sampled per round; the checkpoint also holds the
//          privacy state and Ditto's 1,000 personal models (1,000 x 7,851 doubles, 63 MB).
// The federation trains a few rounds; after each, the very state `fluence train` checkpoints is
// gathered and written (write_checkpoint, rank 0, through a .partial file renamed when complete),
// then flushed to disk (fsync, which `fluence train` does not do) and read back as a restart does.
// Round times exclude the checkpoint. Run under mpirun:
//   scripts/mpirun.sh -n 2 build/bench/bench_checkpoint [--rounds R] [--dir DIRECTORY]
// Times are wall clock on rank 0 after a barrier; the medians over the rounds are printed.
#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/blas_tuning.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/fl/federation.hpp"
#include "fluence/fl/private_training.hpp"
#include "fluence/io/checkpoint.hpp"
#include "train_checkpoint.hpp"  // src/app: the state `fluence train` checkpoints

namespace fluence {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDeck = R"(
seed = 4
[data]
source = "idx"
path = "/usr/share/datasets/fashion-mnist"
[partition]
clients = 1000
scheme = "label_shards"
shards_per_client = 1
{}
[model]
l2 = 0.0
[federation]
rounds = {}
local_epochs = 1
batch_size = 16
learning_rate = 0.05
eval_train_loss = false
{}
)";

// FeO2 with Ditto, as inputs/feo2_fashion_mnist.toml.
constexpr const char* kHeavyPrivacy = R"(
[privacy]
mode = "feo2"
sampling_rate = 0.05
epsilon = 3.6
delta = 1e-4
clip = 0.5
count_noise = 5.0
opt_out_fraction = 0.05
ratio = 0.1
[personalization]
method = "ditto"
lambda_private = 0.005
lambda_opt_out = 0.005
metrics_every = 1000
)";

std::string deck_text(int rounds, bool heavy) {
  return fmt::format(fmt::runtime(kDeck), heavy ? "local_test_fraction = 0.2" : "", rounds,
                     heavy ? kHeavyPrivacy : "");
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// fsync of `path` (rank 0): the time to make a written checkpoint durable.
void flush_to_disk(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Seconds per step, one entry per round.
struct Timings {
  std::vector<double> round, gather, write, fsync, read;
  double megabytes = 0.0;
};

// After a barrier: the seconds since `clock` started; restarts it.
double lap(Stopwatch& clock) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double seconds = clock.seconds();
  clock = Stopwatch();
  return seconds;
}

// Bitwise equality of the arrays (NaN, as an unevaluated train loss, equals itself).
bool same_bits(const CheckpointState& a, const CheckpointState& b) {
  if (a.arrays.size() != b.arrays.size()) return false;
  for (const auto& [name, values] : a.arrays) {
    const auto found = b.arrays.find(name);
    if (found == b.arrays.end() || found->second.size() != values.size() ||
        (!values.empty() &&
         std::memcmp(values.data(), found->second.data(), values.size() * sizeof(double)) != 0))
      return false;
  }
  return true;
}

// What `fluence train` does at a checkpoint (gather the state, write it, keep 1), then fsync and
// a restart's read, each step timed.
void checkpoint_timed(const std::string& directory, const Deck& deck, int round,
                      const std::vector<double>& theta, const std::vector<RoundMetrics>& history,
                      const PrivateTraining* private_training, Timings& t) {
  Stopwatch clock;
  const CheckpointState state = app::training_state(round, theta, history, private_training);
  t.gather.push_back(lap(clock));
  const std::string path = write_checkpoint(directory, deck, state, 1);
  t.write.push_back(lap(clock));
  if (world_rank() == 0) flush_to_disk(path);
  t.fsync.push_back(lap(clock));
  const CheckpointState back = read_checkpoint(path, deck);
  t.read.push_back(lap(clock));
  // Rank 0's state is the one written (the wall times in the history are each rank's own).
  int same = world_rank() == 0 && back.round == round && same_bits(back, state) ? 1 : 0;
  MPI_Bcast(&same, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (same == 0)
    throw RuntimeError("bench_checkpoint: the checkpoint read back differs from the state written");
  if (world_rank() == 0) t.megabytes = static_cast<double>(fs::file_size(path)) / 1e6;
}

void run_case(const std::string& name, bool heavy, int rounds, const std::string& root) {
  const std::string directory = (fs::path(root) / name).string();
  if (world_rank() == 0) fs::create_directories(directory);
  const Deck deck = Deck::from_string(deck_text(rounds, heavy), "bench_checkpoint", deck_schema());
  FederatedProblem problem = build_problem(deck);
  const FederationConfig config = FederationConfig::from_deck(deck);
  Federation federation(problem);
  const PrivacyConfig privacy =
      PrivacyConfig::from_deck(deck, static_cast<int>(problem.client_rows.size()), config.rounds);
  const PersonalizationConfig personalization = PersonalizationConfig::from_deck(deck, config);
  std::optional<PrivateTraining> private_training;
  if (heavy) private_training.emplace(federation, privacy, personalization);
  Timings t;
  Stopwatch round_clock;
  lap(round_clock);
  federation.train(
      config, {}, private_training ? &*private_training : nullptr,
      [&](int round, const std::vector<double>& theta, const std::vector<RoundMetrics>& history) {
        t.round.push_back(lap(round_clock));
        checkpoint_timed(directory, deck, round, theta, history,
                         private_training ? &*private_training : nullptr, t);
        lap(round_clock);  // the next round starts now
        return false;
      });
  const double round = median(t.round);
  const double checkpoint = median(t.gather) + median(t.write);
  log::info("{:<6} {:>7} {:>8.1f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.3f} {:>9.3f}",
            name, federation.parameters(), t.megabytes, round, median(t.gather), median(t.write),
            median(t.fsync), median(t.read), checkpoint / round,
            (checkpoint + median(t.fsync)) / round);
}

}  // namespace
}  // namespace fluence

int main(int argc, char** argv) {
  using namespace fluence;
  select_blas_core(argv);
  Environment environment(&argc, &argv);
  int rounds = 9;
  std::string directory;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--dir") == 0) directory = argv[i + 1];
  }
  const bool own_directory = directory.empty();
  if (own_directory && world_rank() == 0)
    directory =
        (fs::temp_directory_path() / fmt::format("fluence-bench-checkpoint-{}", getpid())).string();
  directory = broadcast_string(directory);
  log::info(
      "# checkpoint of `fluence train` vs one round: 1,000 Fashion-MNIST clients, 7,850 "
      "parameters, {} rank(s), median of {} rounds; directory {}",
      world_size(), rounds, directory);
  log::info(
      "# light: FedAvg, all clients every round, theta + history; heavy: FeO2 + Ditto, 5% "
      "sampled, + 1,000 personal models");
  log::info("{:<6} {:>7} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}", "case", "p", "MB",
            "round s", "gather s", "write s", "fsync s", "read s", "ckpt/rnd", "+fsync");
  log::info(
      "# ckpt/rnd = (gather + write) / round, what checkpointing every round adds; +fsync: with a "
      "flush to disk");
  int status = 0;
  try {
    run_case("light", false, rounds, directory);
    run_case("heavy", true, rounds, directory);
  } catch (const std::exception& error) {
    fmt::print(stderr, "bench_checkpoint: {}\n", error.what());
    status = 1;
  }
  if (own_directory && world_rank() == 0) fs::remove_all(directory);
  if (status != 0) MPI_Abort(MPI_COMM_WORLD, status);
  return 0;
}
