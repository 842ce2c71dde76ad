// fluence audit DECK: the deck's local randomizers measured as they run (docs/math.md §11): for
// every attribute of [ldp] and every eps a client uses, the empirical eps of randomized response
// (estimate and lower bound) and the attribute-inference accuracy against the Bayes bound; write
// <out>/results.h5. Every rank computes the same audit (it is small next to the set-up).
// fluence audit DECK --collect DIR: the multi-run audit (docs/math.md §11.4) of the `fluence
// train` runs of DECK below DIR, each with one target canary inserted or not; every rank reads
// the (small) files and computes the same audit. fluence audit DECK --membership MODEL.h5: the
// loss-threshold membership inference on that model, and LiRA at the client or example level with
// audit.lira_shadows (docs/math.md §11.5).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include "fluence/audit/ldp_audit.hpp"
#include "fluence/audit/membership_inference.hpp"
#include "fluence/audit/multi_run.hpp"
#include "fluence/audit/purposes.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/fl/federation.hpp"
#include "fluence/fl/private_training.hpp"
#include "fluence/fl/problem.hpp"
#include "fluence/io/audit_input.hpp"
#include "fluence/io/audit_output.hpp"
#include "fluence/io/model_input.hpp"
#include "fluence/io/results.hpp"
#include "run_context.hpp"

namespace fluence::app {

namespace {

// "run_2" before "run_10": digit runs compare as numbers, the rest as text.
bool natural_less(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      std::size_t i_end = i, j_end = j;
      while (i_end < a.size() && digit(a[i_end])) ++i_end;
      while (j_end < b.size() && digit(b[j_end])) ++j_end;
      std::string x = a.substr(i, i_end - i), y = b.substr(j, j_end - j);
      x.erase(0, std::min(x.find_first_not_of('0'), x.size()));
      y.erase(0, std::min(y.find_first_not_of('0'), y.size()));
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = i_end;
      j = j_end;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

// Every results.h5 below `folder` but the collector's own output's, relative to `folder`, in run
// order: natural order of the paths (run_k of the SLURM array task k), fixed before any score is
// read, as the bound's split into halves requires.
std::vector<std::string> collected_results(const std::string& folder, const std::string& output) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(folder, error))
    throw InputError(fmt::format("--collect {}: no such directory", folder));
  const fs::path own = fs::weakly_canonical(fs::path(output) / "results.h5", error);
  std::vector<std::string> found;
  for (auto it = fs::recursive_directory_iterator(folder, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (!it->is_regular_file() || it->path().filename() != "results.h5") continue;
    if (fs::weakly_canonical(it->path(), error) == own) continue;
    found.push_back(fs::relative(it->path(), folder).generic_string());
  }
  std::sort(found.begin(), found.end(), natural_less);
  return found;
}

// The keys of [output] and those a multi-run audit's runs may differ in.
std::vector<std::string> run_specific_overrides(const Deck& deck) {
  std::vector<std::string> sets;
  for (const KeySpec& spec : deck.schema()) {
    if (spec.type == KeyType::section || spec.path.find("[]") != std::string::npos) continue;
    if ((spec.path == "seed" || spec.path == "audit.canary_inclusion" ||
         spec.path.rfind("output.", 0) == 0) &&
        deck.has(spec.path))
      sets.push_back(spec.path + "=" + deck.value_text(spec.path));
  }
  return sets;
}

// Why the run's deck is not `deck` up to seed, audit.canary_inclusion and [output] ("" if it is).
std::string run_deck_problem(const CanaryRun& run, const Deck& deck) {
  const std::vector<std::string> sets = run_specific_overrides(deck);
  const Deck mine = Deck::from_string(deck.resolved_toml(), deck.origin(), deck.schema(), sets);
  std::optional<Deck> theirs;
  try {
    theirs = Deck::from_string(run.deck, run.path, deck.schema(), sets);
  } catch (const InputError& error) {
    return fmt::format("its deck cannot be read ({})", error.what());
  }
  if (theirs->resolved_toml() == mine.resolved_toml()) return "";
  std::string named;
  int count = 0;
  for (const KeySpec& spec : deck.schema()) {
    if (spec.type == KeyType::section || spec.path.find("[]") != std::string::npos) continue;
    if (theirs->value_text(spec.path) == mine.value_text(spec.path)) continue;
    if (count++ < 3)
      named += fmt::format("{}{} = {} there, {} in {}", named.empty() ? "" : "; ", spec.path,
                           message_excerpt(theirs->value_text(spec.path)),
                           message_excerpt(mine.value_text(spec.path)), deck.origin());
  }
  if (named.empty()) named = "an array of tables differs";
  return fmt::format(
      "it was trained with another deck: {} (a multi-run audit's runs differ "
      "only in seed, audit.canary_inclusion and [output])",
      named);
}

int run_multi_run_audit(RunContext& run, const CommandLine& command_line) {
  const Deck& deck = run.deck();
  const double confidence = deck.real("audit.confidence");
  const std::vector<std::string> names =
      collected_results(command_line.collect, run.output_directory());
  MultiRunRuns runs;
  runs.confidence = confidence;
  std::vector<double> with_all, without_all, with_final, without_final;
  for (const std::string& name : names) {
    const std::string path = (std::filesystem::path(command_line.collect) / name).string();
    if (holds_multi_run_audit(path)) {
      log::info("skipped {}: an earlier multi-run audit's output", path);
      continue;
    }
    const CanaryRun canary = read_canary_run(path);
    const std::string problem = run_deck_problem(canary, deck);
    if (!problem.empty()) throw InputError(fmt::format("{}: {}", path, problem));
    const std::string inclusion =
        Deck::from_string(canary.deck, path, deck.schema()).string("audit.canary_inclusion");
    if (inclusion != "random" && canary.inserted.size() != 1)
      throw InputError(fmt::format(
          "{}: audit.canary_inclusion = \"{}\" with {} canaries: its runs with and without "
          "differ in {} clients, not one; a multi-run audit's forced runs need audit.canaries = 1",
          path, inclusion, canary.inserted.size(), canary.inserted.size()));
    if (runs.names.empty()) {
      runs.epsilon = canary.epsilon;
      runs.delta = canary.delta;
    }
    runs.names.push_back(name);
    runs.seed.push_back(canary.seed);
    runs.inserted.push_back(canary.inserted.front());
    runs.score_all_iterates.push_back(canary.score_all_iterates.front());
    runs.score_final.push_back(canary.score_final.front());
    (canary.inserted.front() ? with_all : without_all).push_back(canary.score_all_iterates.front());
    (canary.inserted.front() ? with_final : without_final).push_back(canary.score_final.front());
  }
  if (with_all.size() < 4 || without_all.size() < 4)
    throw InputError(fmt::format(
        "--collect {}: {} run(s) with the target canary and {} without (of {} runs found); "
        "a multi-run audit needs at least 4 of each",
        command_line.collect, with_all.size(), without_all.size(), runs.names.size()));
  run.prepare_output();
  const double beta = 1.0 - confidence;
  const MultiRunAudit all_iterates = multi_run_audit(with_all, without_all, runs.delta, beta);
  const MultiRunAudit final_model = multi_run_audit(with_final, without_final, runs.delta, beta);
  log::info(
      "multi-run audit of {} runs ({} with the target, {} without), accountant eps {:.4g} "
      "at delta {:.3g}:",
      runs.names.size(), with_all.size(), without_all.size(), runs.epsilon, runs.delta);
  for (const auto& [label, audit] :
       {std::pair{"all iterates", &all_iterates}, std::pair{"final model", &final_model}})
    log::info(
        "  {:<12}: eps lower bound {:.4f} ({:.0f}% confidence), Gaussian estimate {:.4f}, "
        "AUC {:.4f}, TPR {:.4f} at 0.1% FPR, {:.4f} at 1%",
        label, audit->bound.epsilon_lower, 100.0 * confidence, audit->estimate.epsilon,
        audit->roc.auc, audit->roc.tpr_at_fpr_0_001, audit->roc.tpr_at_fpr_0_01);
  if (all_iterates.bound.epsilon_lower > runs.epsilon ||
      final_model.bound.epsilon_lower > runs.epsilon)
    log::warn("the multi-run lower bound exceeds the accountant's eps {:.4g}", runs.epsilon);
  return run.finish(
      [&](ResultsFile& file) { write_multi_run_output(file, runs, all_iterates, final_model); });
}

// Every row's cross-entropy loss under theta, one row at a time.
std::vector<double> row_losses(const Model& model, const double* x, const std::int32_t* y,
                               std::size_t rows, const std::vector<double>& theta) {
  Workspace work;
  std::vector<double> losses(rows);
  const auto width = static_cast<std::size_t>(model.features());
  for (std::size_t i = 0; i < rows; ++i)
    losses[i] = model.loss_sum(x + i * width, y + i, 1, theta.data(), work).loss_sum;
  return losses;
}

// Collective: the losses of every client's training rows, clients in id order and each client's
// rows in its order, on every rank (whichever ranks host them).
std::vector<double> member_losses(const FederatedProblem& problem,
                                  const std::vector<double>& theta) {
  std::vector<double> pairs;  // (client id, loss) items in this rank's order
  for (const Client& client : problem.clients) {
    const TrainingRows rows = client.training_rows();
    if (rows.rows > 0 && rows.features == nullptr)
      throw InputError("--membership: a client's rows are held as byte codes only");
    for (const double loss :
         row_losses(*problem.model, rows.features, rows.labels, rows.rows, theta)) {
      pairs.push_back(client.id());
      pairs.push_back(loss);
    }
  }
  const std::vector<double> all = ordered_allgather(pairs, static_cast<int>(pairs.size() / 2), 2);
  std::vector<std::pair<double, double>> items;
  for (std::size_t i = 0; i + 1 < all.size(); i += 2) items.emplace_back(all[i], all[i + 1]);
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<double> losses;
  for (const auto& item : items) losses.push_back(item.second);
  return losses;
}

// Collective: the losses of the server's test rows in row order, on every rank.
std::vector<double> nonmember_losses(const FederatedProblem& problem,
                                     const std::vector<double>& theta) {
  const TestShard& test = problem.test;
  const auto width = static_cast<std::size_t>(problem.model->features());
  std::vector<double> local;
  int items = 0;
  if (test.all_rows > 0) {  // a network's evaluation: every rank holds every row
    std::vector<double> decoded;
    const double* features = test.all_features.data();
    if (test.all_features.size() != test.all_rows * width) {
      // Image data: the rows are held as byte codes of test.coding only, decoded to the doubles
      // the encoding gives (x = offset + step k).
      if (!test.coding || test.all_codes.size() != test.all_rows * width)
        throw InputError("--membership: the test rows are held as byte codes only");
      if (world_rank() == 0) {
        decoded.resize(test.all_rows * width);
        test.coding->decode(test.all_codes.data(), test.all_rows, decoded.data());
      }
      features = decoded.data();
    }
    if (world_rank() == 0)
      local = row_losses(*problem.model, features, test.all_labels.data(), test.all_rows, theta);
  } else {
    if (test.rows > 0 && test.features.size() != test.rows * width)
      throw InputError("--membership: the test rows are held as byte codes only");
    local = row_losses(*problem.model, test.features.data(), test.labels.data(), test.rows, theta);
  }
  items = static_cast<int>(local.size());
  return ordered_allgather(local, items, 1);
}

// Collective: every client's mean loss under theta, in client-id order, on every rank.
std::vector<double> client_mean_losses(const FederatedProblem& problem,
                                       const std::vector<double>& theta) {
  std::vector<double> pairs;
  for (const Client& client : problem.clients) {
    const TrainingRows rows = client.training_rows();
    if (rows.rows > 0 && rows.features == nullptr)
      throw InputError("--membership: a client's rows are held as byte codes only");
    const auto losses = row_losses(*problem.model, rows.features, rows.labels, rows.rows, theta);
    double sum = 0.0;
    for (const double loss : losses) sum += loss;
    pairs.push_back(client.id());
    pairs.push_back(losses.empty() ? 0.0 : sum / static_cast<double>(losses.size()));
  }
  const std::vector<double> all = ordered_allgather(pairs, static_cast<int>(pairs.size() / 2), 2);
  std::vector<double> means(problem.client_rows.size(), 0.0);
  for (std::size_t i = 0; i + 1 < all.size(); i += 2)
    means[static_cast<std::size_t>(all[i])] = all[i + 1];
  return means;
}

// Client-level LiRA (docs/math.md §11.5): a target and `shadows` shadow federations, each trained
// by FedAvg on a half of the clients; shadow 2j + 1 trains on the complement of shadow 2j's half,
// so that every client is IN for exactly half of the shadows. The statistic is minus the client's
// mean loss; members are the target's clients.
struct ClientLira {
  std::vector<std::uint8_t> member;  // per client: in the target's half
  std::vector<double> lira, loss_threshold;
  RocSummary lira_roc, loss_roc;
};

ClientLira client_lira(FederatedProblem& problem, const Deck& deck, int shadows, bool verbose) {
  if (!problem.model->linear())
    throw InputError(
        "audit.lira_shadows: client-level LiRA trains softmax regression only (model.type = "
        "\"logistic\")");
  if (shadows < 4 || shadows % 2 != 0)
    throw InputError(
        fmt::format("audit.lira_shadows = {}: expected an even number >= 4 (or 0)", shadows));
  const auto clients = static_cast<int>(problem.client_rows.size());
  FederationConfig training = FederationConfig::from_deck(deck);
  training.polish_verbose = false;
  training.evaluate_rounds = false;
  Federation federation(problem);
  // Trains on the clients whose `in` is 1; returns minus each client's mean loss.
  auto statistic_of = [&](const std::vector<std::uint8_t>& in) {
    std::vector<int> excluded;
    for (int c = 0; c < clients; ++c)
      if (!in[static_cast<std::size_t>(c)]) excluded.push_back(c);
    federation.exclude_clients(excluded);
    const std::vector<double> theta = federation.train(training).theta;
    federation.exclude_clients({});
    std::vector<double> statistic = client_mean_losses(problem, theta);
    for (double& value : statistic) value = -value;
    return statistic;
  };
  auto half = [&](std::uint64_t draw) {
    std::vector<std::uint8_t> in(static_cast<std::size_t>(clients));
    for (int c = 0; c < clients; ++c) {
      Stream stream(problem.seed, purpose::lira_halves, draw, static_cast<std::uint64_t>(c));
      in[static_cast<std::size_t>(c)] = stream.uniform() < 0.5;
    }
    return in;
  };
  ClientLira result;
  result.member = half(0);
  const std::vector<double> target = statistic_of(result.member);
  std::vector<double> shadow;
  std::vector<std::uint8_t> shadow_in;
  ProgressLine bar("LiRA shadow federations", shadows, verbose);
  for (int k = 0; k < shadows; ++k) {
    std::vector<std::uint8_t> in = half(1 + static_cast<std::uint64_t>(k / 2));
    if (k % 2 == 1)
      for (auto& bit : in) bit = static_cast<std::uint8_t>(1 - bit);
    const std::vector<double> statistic = statistic_of(in);
    shadow.insert(shadow.end(), statistic.begin(), statistic.end());
    shadow_in.insert(shadow_in.end(), in.begin(), in.end());
    bar.done(k + 1);
  }
  result.lira = lira_scores(target, shadow, shadow_in, {.global_variance = shadows < 16});
  result.loss_threshold = target;
  auto split = [&](const std::vector<double>& scores) {
    std::pair<std::vector<double>, std::vector<double>> sides;
    for (int c = 0; c < clients; ++c)
      (result.member[static_cast<std::size_t>(c)] ? sides.first : sides.second)
          .push_back(scores[static_cast<std::size_t>(c)]);
    return sides;
  };
  const auto [lira_in, lira_out] = split(result.lira);
  const auto [loss_in, loss_out] = split(result.loss_threshold);
  if (lira_in.empty() || lira_out.empty())
    throw InputError(fmt::format("client-level LiRA: the target's half holds {} of {} clients",
                                 lira_in.size(), clients));
  result.lira_roc = summarize_roc(lira_in, lira_out);
  result.loss_roc = summarize_roc(loss_in, loss_out);
  return result;
}

// Example-level LiRA (docs/math.md §11.5; Carlini et al. 2022, online): a target and `shadows`
// shadow models, each trained as the deck trains (FedAvg, or its private training when [privacy]
// says so) on a random half of every client's rows, drawn per training row from purpose
// lira_examples (so the same on any rank count); shadow 2j + 1 trains on the complement of shadow
// 2j's half, so that every example is IN for exactly half of the shadows. Each model trains with
// its own seed (initialization, shuffles, private sampling and noise) from the same purpose. The
// statistic is the scaled confidence phi of the example's label; members are the target's half,
// non-members the other half of the training rows.

// Training rows in client-id order, each client's rows in its order, with their client, on every
// rank (collective).
struct ExampleIndex {
  std::vector<std::int64_t> row, client;
};

ExampleIndex example_index(const FederatedProblem& problem) {
  ExampleIndex index;
  for (std::size_t c = 0; c < problem.client_rows.size(); ++c)
    for (const std::int64_t row : problem.client_rows[c]) {
      index.row.push_back(row);
      index.client.push_back(static_cast<std::int64_t>(c));
    }
  return index;
}

// Collective: per training row (ExampleIndex order), phi = log(p_y / (1 - p_y)) under theta and
// the row's loss, on every rank.
std::pair<std::vector<double>, std::vector<double>> example_statistics(
    const FederatedProblem& problem, const std::vector<double>& theta) {
  const Model& model = *problem.model;
  const auto classes = static_cast<std::size_t>(model.classes());
  Workspace work;
  std::vector<double> items;  // (client id, phi, loss) in this rank's order
  std::vector<double> logits;
  for (const Client& client : problem.clients) {
    const TrainingRows rows = client.training_rows();
    if (rows.rows > 0 && rows.features == nullptr)
      throw InputError("--membership: a client's rows are held as byte codes only");
    logits.resize(rows.rows * classes);
    if (rows.rows > 0) model.logits(rows.features, rows.rows, theta.data(), logits.data(), work);
    const std::vector<double> losses =
        row_losses(model, rows.features, rows.labels, rows.rows, theta);
    for (std::size_t i = 0; i < rows.rows; ++i) {
      items.push_back(client.id());
      items.push_back(scaled_confidence_from_logits(
          std::span<const double>(logits.data() + i * classes, classes),
          static_cast<std::size_t>(rows.labels[i])));
      items.push_back(losses[i]);
    }
  }
  const std::vector<double> all = ordered_allgather(items, static_cast<int>(items.size() / 3), 3);
  std::vector<std::size_t> order(all.size() / 3);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return all[3 * a] < all[3 * b]; });
  std::pair<std::vector<double>, std::vector<double>> result;
  for (const std::size_t i : order) {
    result.first.push_back(all[3 * i + 1]);
    result.second.push_back(all[3 * i + 2]);
  }
  return result;
}

// Hosted client `client` with only the rows whose `keep` is 1 (local row order kept), its codes
// rebuilt as build_problem makes them.
Client client_subset(const FederatedProblem& problem, const Client& client,
                     const std::uint8_t* keep) {
  const std::size_t n = client.size();
  const std::size_t nc = n ? client.original_categorical().size() / n : 0;
  const std::size_t rc = n ? client.categorical().size() / n : 0;
  const auto width = static_cast<std::size_t>(problem.model->features());
  std::vector<std::int64_t> rows;
  std::vector<std::int32_t> original_categorical, original_labels, categorical, labels;
  std::vector<double> features;
  for (std::size_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    rows.push_back(client.rows()[i]);
    original_categorical.insert(original_categorical.end(),
                                client.original_categorical().begin() + i * nc,
                                client.original_categorical().begin() + (i + 1) * nc);
    original_labels.push_back(client.original_labels()[i]);
    categorical.insert(categorical.end(), client.categorical().begin() + i * rc,
                       client.categorical().begin() + (i + 1) * rc);
    labels.push_back(client.labels()[i]);
    features.insert(features.end(), client.features() + i * width,
                    client.features() + (i + 1) * width);
  }
  Client subset(client.id(), std::move(rows), std::move(original_categorical),
                std::move(original_labels), std::move(categorical), std::move(labels),
                std::move(features));
  if (client.training_rows().codes != nullptr) attach_codes(problem, subset);
  if (client.local_test_size() > 0) {
    const double* x = client.local_test_features();
    const std::int32_t* y = client.local_test_labels();
    subset.set_local_test(std::vector<double>(x, x + client.local_test_size() * width),
                          std::vector<std::int32_t>(y, y + client.local_test_size()));
  }
  return subset;
}

// Collective: the model the deck trains (its FedAvg, or its private training) on the training rows
// whose `in` is 1 (ExampleIndex order); the problem's clients are restored afterwards. Returns
// theta and, for a private run, the accountant's eps.
std::pair<std::vector<double>, double> train_on_examples(FederatedProblem& problem,
                                                         const FederationConfig& training,
                                                         const PrivacyConfig& privacy,
                                                         const std::vector<std::uint8_t>& in,
                                                         std::uint64_t training_seed) {
  std::vector<std::size_t> first(problem.client_rows.size() + 1, 0);
  for (std::size_t c = 0; c < problem.client_rows.size(); ++c)
    first[c + 1] = first[c] + problem.client_rows[c].size();
  std::vector<std::vector<std::int64_t>> half_rows(problem.client_rows.size());
  std::int64_t half_total = 0;
  for (std::size_t c = 0; c < problem.client_rows.size(); ++c)
    for (std::size_t i = 0; i < problem.client_rows[c].size(); ++i)
      if (in[first[c] + i]) {
        half_rows[c].push_back(problem.client_rows[c][i]);
        ++half_total;
      }
  std::vector<Client> half_clients;
  half_clients.reserve(problem.clients.size());
  for (const Client& client : problem.clients)
    half_clients.push_back(
        client_subset(problem, client, in.data() + first[static_cast<std::size_t>(client.id())]));
  // Swapped in for the training, swapped back however it ends; the seed keys the training's
  // streams (initialization, shuffles, private sampling and noise) and nothing else here, the
  // data being built already.
  struct Swap {
    FederatedProblem& problem;
    std::vector<Client>& clients;
    std::vector<std::vector<std::int64_t>>& rows;
    std::int64_t total;
    std::uint64_t seed;
    Swap(FederatedProblem& p, std::vector<Client>& c, std::vector<std::vector<std::int64_t>>& r,
         std::int64_t t, std::uint64_t s)
        : problem(p), clients(c), rows(r), total(t), seed(s) {
      exchange();
    }
    ~Swap() { exchange(); }
    void exchange() {
      std::swap(problem.clients, clients);
      std::swap(problem.client_rows, rows);
      std::swap(problem.total_train_rows, total);
      std::swap(problem.seed, seed);
    }
  } swap(problem, half_clients, half_rows, half_total, training_seed);
  if (problem.total_train_rows == 0)
    throw InputError("example-level LiRA: a half of the training rows is empty");
  Federation federation(problem);
  if (!privacy.enabled())
    return {federation.train(training).theta, std::numeric_limits<double>::quiet_NaN()};
  PrivateTraining private_training(federation, privacy, {}, training.aggregator);
  std::vector<double> theta = federation.train(training, {}, &private_training).theta;
  const auto& epsilon = private_training.history().epsilon;
  return {std::move(theta),
          epsilon.empty() ? std::numeric_limits<double>::quiet_NaN() : epsilon.back()};
}

ExampleLiraOutput example_lira(FederatedProblem& problem, const Deck& deck, int shadows,
                               bool verbose) {
  if (shadows < 4 || shadows % 2 != 0)
    throw InputError(
        fmt::format("audit.lira_shadows = {}: expected an even number >= 4 (or 0)", shadows));
  FederationConfig training = FederationConfig::from_deck(deck);
  training.polish_verbose = false;
  training.evaluate_rounds = false;
  const PrivacyConfig privacy =
      PrivacyConfig::from_deck(deck, static_cast<int>(problem.client_rows.size()), training.rounds);
  const ExampleIndex index = example_index(problem);
  const std::size_t examples = index.row.size();
  auto half = [&](std::uint64_t draw) {
    std::vector<std::uint8_t> in(examples);
    for (std::size_t e = 0; e < examples; ++e) {
      Stream stream(problem.seed, purpose::lira_examples, draw,
                    static_cast<std::uint64_t>(index.row[e]));
      in[e] = stream.uniform() < 0.5;
    }
    return in;
  };
  ExampleLiraOutput result;
  result.row = index.row;
  result.client = index.client;
  result.member = half(0);
  result.delta = privacy.enabled() ? privacy.delta : 0.0;
  // Every model's training randomness is its own (Carlini et al.'s independent shadow runs): a
  // shadow sharing the target's private noise would see through it.
  auto training_seed = [&](std::uint64_t model) {
    return Stream(problem.seed, purpose::lira_examples, model, ~std::uint64_t{0}).next_u64();
  };
  const auto [target_theta, epsilon] =
      train_on_examples(problem, training, privacy, result.member, training_seed(0));
  result.epsilon = epsilon;
  auto [target_phi, target_loss] = example_statistics(problem, target_theta);
  result.target_confidence = target_phi;
  ProgressLine bar("LiRA shadow models", shadows, verbose);
  for (int k = 0; k < shadows; ++k) {
    std::vector<std::uint8_t> in = half(1 + static_cast<std::uint64_t>(k / 2));
    if (k % 2 == 1)
      for (auto& bit : in) bit = static_cast<std::uint8_t>(1 - bit);
    const std::vector<double> theta =
        train_on_examples(problem, training, privacy, in,
                          training_seed(1 + static_cast<std::uint64_t>(k)))
            .first;
    const std::vector<double> phi = example_statistics(problem, theta).first;
    result.shadow_confidence.insert(result.shadow_confidence.end(), phi.begin(), phi.end());
    result.shadow_in.insert(result.shadow_in.end(), in.begin(), in.end());
    bar.done(k + 1);
  }
  result.global_variance = shadows < 16;
  result.lira = lira_scores(result.target_confidence, result.shadow_confidence, result.shadow_in,
                            {.global_variance = result.global_variance});
  result.loss_threshold = loss_threshold_scores(target_loss);
  auto split = [&](const std::vector<double>& scores) {
    std::pair<std::vector<double>, std::vector<double>> sides;
    for (std::size_t e = 0; e < examples; ++e)
      (result.member[e] ? sides.first : sides.second).push_back(scores[e]);
    return sides;
  };
  const auto [lira_in, lira_out] = split(result.lira);
  const auto [loss_in, loss_out] = split(result.loss_threshold);
  if (lira_in.empty() || lira_out.empty())
    throw InputError(fmt::format("example-level LiRA: the target's half holds {} of {} examples",
                                 lira_in.size(), examples));
  result.lira_roc = summarize_roc(lira_in, lira_out);
  result.loss_roc = summarize_roc(loss_in, loss_out);
  return result;
}

// fluence audit DECK --membership MODEL.h5 (docs/math.md §11.5): the loss-threshold attack, and
// with audit.lira_shadows client-level LiRA.
int run_membership_audit(RunContext& run, const CommandLine& command_line) {
  const int shadows = static_cast<int>(run.deck().integer("audit.lira_shadows"));
  run.prepare_output();
  FederatedProblem problem = run.set_up();
  const std::vector<double> theta =
      read_trained_theta(command_line.membership, problem, run.deck(), true);
  const std::vector<double> members = member_losses(problem, theta);
  const std::vector<double> nonmembers = nonmember_losses(problem, theta);
  if (members.empty() || nonmembers.empty())
    throw InputError(
        fmt::format("--membership: {} training and {} test rows: the attack needs both",
                    members.size(), nonmembers.size()));
  const RocSummary summary =
      summarize_roc(loss_threshold_scores(members), loss_threshold_scores(nonmembers));
  log::info(
      "membership inference (loss threshold) on {}: {} members, {} non-members: AUC {:.4f}, "
      "TPR {:.4f} at 0.1% FPR, {:.4f} at 1%",
      command_line.membership, members.size(), nonmembers.size(), summary.auc,
      summary.tpr_at_fpr_0_001, summary.tpr_at_fpr_0_01);
  std::optional<ClientLira> lira;
  std::optional<ExampleLiraOutput> examples;
  if (shadows > 0 && run.deck().string("audit.membership_level") == "example") {
    examples = example_lira(problem, run.deck(), shadows, run.verbose());
    log::info(
        "example-level LiRA ({} shadows, {} examples): AUC {:.4f}, TPR {:.4f} at 0.1% FPR, "
        "{:.4f} at 1%; loss threshold on the same target: AUC {:.4f}, TPR {:.4f} at 0.1% FPR, "
        "{:.4f} at 1%",
        shadows, examples->member.size(), examples->lira_roc.auc,
        examples->lira_roc.tpr_at_fpr_0_001, examples->lira_roc.tpr_at_fpr_0_01,
        examples->loss_roc.auc, examples->loss_roc.tpr_at_fpr_0_001,
        examples->loss_roc.tpr_at_fpr_0_01);
  } else if (shadows > 0) {
    lira = client_lira(problem, run.deck(), shadows, run.verbose());
    log::info(
        "client-level LiRA ({} shadows): AUC {:.4f}, TPR {:.4f} at 1% FPR; loss threshold "
        "on the same target: AUC {:.4f}, TPR {:.4f} at 1% FPR",
        shadows, lira->lira_roc.auc, lira->lira_roc.tpr_at_fpr_0_01, lira->loss_roc.auc,
        lira->loss_roc.tpr_at_fpr_0_01);
  }
  return run.finish([&](ResultsFile& file) {
    write_membership_output(file, members, nonmembers, summary);
    if (lira)
      write_client_lira_output(file, lira->member, lira->lira, lira->loss_threshold, lira->lira_roc,
                               lira->loss_roc);
    if (examples) write_example_lira_output(file, *examples);
  });
}

}  // namespace

int run_audit(const CommandLine& command_line) {
  RunContext run(command_line);
  if (!command_line.collect.empty()) return run_multi_run_audit(run, command_line);
  if (!command_line.membership.empty()) return run_membership_audit(run, command_line);
  const Deck& deck = run.deck();
  const AuditConfig config = AuditConfig::from_deck(deck);
  run.prepare_output();
  const FederatedProblem problem = run.set_up();
  if (problem.ldp.attributes.empty())
    throw InputError(deck.origin() +
                     ": [ldp] randomizes no attribute (ldp.attributes is empty): nothing to audit");
  Stopwatch clock;
  const auto cases =
      audit_ldp_plan(problem.ldp, config, static_cast<std::uint64_t>(deck.integer("seed")));
  log::info("LDP audit of randomized response ({} case(s), {:.0f}% confidence, {}):", cases.size(),
            100.0 * config.confidence, format_duration(clock.seconds()));
  if (!command_line.quiet)
    log::info("{:>12} {:>3} {:>8} {:>10} {:>10} {:>9} {:>9} {:>10}", "attribute", "k", "eps",
              "estimate", "lower", "accuracy", "Bayes", "draws");
  for (const auto& c : cases)
    if (!command_line.quiet)
      log::info("{:>12} {:>3} {:>8.4g} {:>10.4f} {:>10.4f} {:>9.4f} {:>9.4f} {:>10}", c.attribute,
                c.result.domain, c.result.epsilon_configured, c.result.epsilon_estimate,
                c.result.epsilon_lower, c.result.inference_accuracy, c.result.bayes_accuracy,
                c.result.draws);
  for (const auto& c : cases)
    if (c.result.epsilon_lower > c.result.epsilon_configured)
      log::warn("{} at eps = {}: the measured lower bound {:.4f} exceeds the configured eps",
                c.attribute, c.result.epsilon_configured, c.result.epsilon_lower);
  return run.finish([&](ResultsFile& file) { write_ldp_audit_output(file, cases, config); });
}

}  // namespace fluence::app
