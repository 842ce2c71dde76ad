// [lia] of the deck -> LiaConfig, with the checks that need more than one key.
#include <fmt/core.h>

#include <cmath>

#include "fluence/core/deck_keys.hpp"
#include "fluence/core/error.hpp"
#include "fluence/lia/lia.hpp"
#include "fluence/lia/votes.hpp"

namespace fluence::lia {

namespace {

// A key of type "epsilon" used for a single level: a number or "inf", not a table.
double single_level(const Deck& deck, const std::string& path) {
  const EpsilonSpec spec = deck.epsilon(path);
  if (!spec.by_attribute.empty())
    throw InputError(
        fmt::format("{}: {} takes a number > 0 or \"inf\", not a table", deck.where(path), path));
  return spec.all;
}

}  // namespace

void register_lia_keys(DeckSchema& schema) {
  using namespace deck_keys;
  using T = KeyType;
  schema.add({
      section("lia",
              "lazy-influence data filtering ([LIA](../docs/references.md#lia), [Rokvic et al. "
              "2022](../docs/references.md#rokvic-2022), `fluence lia`)"),
      key("lia.participants", T::integer, "500",
          "participants P; each is a contributor and a validator", 3),
      key("lia.train_size", T::integer, "100", "each participant's training batch (LIA: 100)", 1),
      key("lia.validation_size", T::integer, "50", "each participant's validation set (LIA: 50)",
          1),
      choice("lia.validation_mix", "\"participant\"", {"participant", "iid"},
             "validation labels follow the participant's Dirichlet mix (the paper's non-IID "
             "set-up), or the population's"),
      key("lia.warmup_fraction", T::real, "0.01",
          "share of the training rows kept by the center to train M0 (LIA: ~1%)", 0.0, 1.0, true),
      with_note(
          below_maximum(key(
              "lia.public_fraction", T::real, "0",
              "share of the training rows that no participant holds and that the body "
              "(`lia.body` `\"mlp\"` or `\"network\"`) is trained on, the analog of "
              "[LIA](../docs/references.md#lia)'s ImageNet pretraining; disjoint from the warm-up, "
              "which then trains only M0. 0: the body trains on the warm-up rows. Needs a trained "
              "body. With `data.numeric_scaling = \"public\"` these rows (else the warm-up's) "
              "also give the numeric columns' mean/std",
              0.0, 1.0)),
          "with `warmup_fraction` summing below 1"),
      with_note(key("lia.alpha", T::epsilon, "0.1",
                    "Dirichlet concentration of a participant's label mix; `\"inf\"` = IID"),
                "one level: no table"),
      key("lia.corrupted_fraction", T::real, "0.3",
          "share of participants whose batch is corrupted", 0.0, 1.0),
      choice("lia.corruption", "\"label_shift\"", {"label_shift", "random_label"},
             "one fixed derangement of the labels for every corrupted batch, or uniform "
             "random labels"),
      key("lia.corruption_rate", T::real, "1.0",
          "share of a corrupted batch that is corrupted (LIA: 1.0 or 0.9)", 0.0, 1.0),
      key("lia.local_epochs", T::integer, "3",
          "contributors' DP-SGD epochs k; also the local epochs of the FL comparison", 1),
      key("lia.batch_size", T::integer, "10",
          "DP-SGD expected batch size B (Poisson sampling at rate B / train_size) and the "
          "FL mini-batch",
          1),
      key("lia.learning_rate", T::real, "0.1",
          "local step size of DP-SGD, and of FL unless `fl_learning_rate` is given", 0.0, kInf,
          true),
      key("lia.fl_learning_rate", T::real, "0",
          "local step size of the FL comparison and of `mode = \"per_round\"`'s aggregated "
          "updates; 0 = `learning_rate` (a step large enough to separate the votes can be too "
          "large for FedAvg)",
          0.0),
      key("lia.clip", T::real, "1.0",
          "DP-SGD per-example clipping norm Δ (0 = none, only with `epsilon_train = "
          "\"inf\"`)",
          0.0),
      with_note(
          key("lia.epsilon_train", T::epsilon, "1.0",
              "DP-SGD ε of a contributor's batch at `lia.delta` (RDP accountant); `\"inf\"` = "
              "no noise"),
          "one level: no table"),
      key("lia.delta", T::real, "1e-5", "DP-SGD δ", 0.0, 1.0, true),
      with_note(key("lia.epsilon_vote", T::epsilon, "1.0",
                    "ε of each vote's randomized response (the LIA paper's Eq. 2); `\"inf\"` = "
                    "votes sent as they are. "
                    "A validator casts many votes from one validation set: its total is "
                    "`/lia/epsilon_validator`"),
                "one level: no table"),
      choice("lia.vote_accounting", "\"exact\"", {"exact", "seed"},
             "ε of a vote: ln((1−p/2)/(p/2)) (exact), or the paper's Eq. 3, twice that (more "
             "noise for the same stated ε)"),
      choice("lia.vote_baseline", "\"model\"", {"model", "median", "quantile"},
             "a vote is +1 when the validator's loss difference L(θ_t) − L(θ_A) exceeds 0 "
             "(the LIA paper's Eq. 1 as written), the validator's median difference over the "
             "contributors it "
             "evaluates (removes the shift every DP-noisy layer and every foreign non-IID "
             "batch shares; math.md §9), or their `vote_quantile` quantile"),
      choice("lia.vote_loss", "\"cross_entropy\"", {"cross_entropy", "zero_one"},
             "the loss L of the LIA paper's Eq. 1: the model's cross-entropy, or the 0-1 loss (a "
             "validator "
             "compares how many of its validation rows each model classifies correctly; the "
             "first maximal logit is the prediction). docs/results/lia.md measures both"),
      choice("lia.relevance", "\"none\"", {"none", "predicted_classes"},
             "how the center combines the votes on a contributor: their sum "
             "([LIA](../docs/references.md#lia)), or their mean weighted by the overlap of "
             "the validator's and the contributor's noisy histograms of M0's predicted "
             "classes (beyond the paper; math.md §9, \"Relevance-weighted votes\"). "
             "`vote_sum` then holds the weighted means, in [−1, 1]"),
      with_note(
          key("lia.relevance_epsilon", T::epsilon, "0.2",
              "`relevance = \"predicted_classes\"` only: ε of each participant's "
              "Laplace-noised histogram. It is paid from the budgets: DP-SGD runs at "
              "`epsilon_train` − this, each vote at `epsilon_vote` − this, and the reported ε "
              "are the totals"),
          "one level: no table; below `epsilon_train` and `epsilon_vote` when they are finite"),
      key("lia.relevance_power", T::real, "2.0",
          "`relevance = \"predicted_classes\"` only: a vote's weight is the histograms' "
          "overlap to this power (0 gives the plain mean of the votes; docs/results/lia.md "
          "compares 1–3)",
          0.0, kInf, true),
      key("lia.vote_quantile", T::real, "0.5",
          "`vote_baseline = \"quantile\"` only: the quantile q; a validator votes −1 on "
          "about the share q of its contributors that help it least (0.5 = `\"median\"`; "
          "docs/results/lia.md compares values)",
          0.0, 1.0, true),
      with_note(key("lia.validators_per_contributor", T::integer, "0",
                    "validators drawn at random per contributor; 0 = all other participants", 0),
                "below `participants`"),
      with_note(
          key("lia.validation_subsets", T::integer, "1",
              "split each validation set into this many disjoint subsets (row j in subset j mod "
              "s); each vote reads one, chosen by `validation_split` (§III-B3)",
              1, 255),
          "at most `validation_size`"),
      choice("lia.validation_split", "\"shared\"", {"shared", "disjoint"},
             "which subset a vote reads: one drawn at random per (validator, contributor) pair, "
             "or (`\"disjoint\"`, needs `validation_subsets` >= 2) each validator's votes dealt "
             "to its subsets in turn, with a median or quantile baseline taken per subset, the "
             "paper's remedy. It sets each validator's total ε (`/lia/epsilon_validator`, "
             "docs/math.md §9 \"Vote privacy per validator\"): disjoint subsets compose in "
             "parallel, so the largest subset's vote count times a vote's ε; with `\"shared\"`, a "
             "median or quantile baseline couples all of a validator's votes"),
      choice("lia.mode", "\"single_shot\"", {"single_shot", "per_round"},
             "filter once from M0 before FL ([LIA](../docs/references.md#lia)), or in addition "
             "run `rounds` FL rounds that vote on every round's contributors with the current "
             "global model and aggregate only the accepted ([Rokvic et al. "
             "2022](../docs/references.md#rokvic-2022) Algorithm 1; results in `/lia/round/`). "
             "With `\"per_round\"`, `epsilon_train` is a participant's budget over all rounds, "
             "and every round's votes count in `/lia/epsilon_validator`; needs `rounds` >= 1"),
      choice("lia.body", "\"identity\"", {"identity", "mlp", "network"},
             "the frozen body ([LIA](../docs/references.md#lia) §III-B: only the last layer "
             "is trained and shared): none (the last layer is a logistic regression on the "
             "encoded inputs), a one-hidden-layer ReLU MLP, or the `[model]` network "
             "(`model.type = \"mlp\"` or `\"cnn\"`, any depth); a network is trained end to "
             "end on the warm-up data by Adam (batches of 64, `model.l2`), then its last "
             "layer is taken off and its output, with a constant-1 column when `model.bias`, "
             "feeds the last layer. `\"network\"` needs `model.type` `\"mlp\"` or `\"cnn\"`, "
             "the others `\"logistic\"`"),
      key("lia.hidden", T::integer, "64",
          "mlp: hidden units (the last layer has C x (hidden + 1) parameters)", 1),
      key("lia.body_epochs", T::integer, "30", "mlp, network: Adam epochs on the warm-up data", 1),
      key("lia.body_learning_rate", T::real, "0.01", "mlp, network: Adam step size", 0.0, kInf,
          true),
      key("lia.body_center", T::boolean, "false",
          "mlp, network: subtract the mean of the body's outputs over the rows it was trained on "
          "(the public split, or the warm-up) from every feature. ReLU outputs share a large "
          "positive component, so without it an update toward one class's features raises every "
          "class's logit and the LIA paper's Eq. 1 vote follows the batch's labels more than its "
          "images "
          "(docs/results/lia.md, \"A body trained on public data\")"),
      choice("lia.threshold", "\"kmeans\"", {"kmeans", "mixture", "zero"},
             "acceptance threshold on the vote sums: the midpoint of the two 1-D k-means "
             "clusters ([LIA](../docs/references.md#lia)), the equal-posterior point of a "
             "two-Gaussian mixture fitted by EM (clusters of unequal size and spread), or 0 "
             "([Rokvic et al. 2022](../docs/references.md#rokvic-2022))"),
      key("lia.rounds", T::integer, "25", "FL rounds after filtering (0 = no FL comparison)", 0),
      with_choices(
          key("lia.methods", T::string_array,
              "[\"none\", \"oracle\", \"krum\", \"trimmed_mean\", "
              "\"centered_clipping\", \"lia\", \"lia_cc\"]",
              "FL methods compared (the paper's Fig. 3); KRUM and the trimmed mean use f = the "
              "number of corrupted participants, known a priori"),
          {"none", "oracle", "krum", "trimmed_mean", "centered_clipping", "lia", "lia_cc"}),
      key("lia.cc_tau", T::real, "1.0", "centered clipping radius τ", 0.0, kInf, true),
      key("lia.cc_iterations", T::integer, "3", "centered clipping iterations per round", 1),
      with_note(key("lia.sign_check", T::integer, "0",
                    "contributors whose exact influence (retraining M0's objective with the batch "
                    "added) is compared with the lazy votes (the paper's Fig. 9)",
                    0),
                "at most `participants`"),
      key("lia.retrain_tolerance", T::real, "1e-8",
          "Newton's gradient-norm tolerance for M0 and the sign-check retrains", 0.0, kInf, true),
      section("lia.minority", "minority experiment ([LIA](../docs/references.md#lia) §IV-E)"),
      key("lia.minority.fractions", T::real_array, "[]",
          "shares of the newcomer's batch from the missing class (LIA: 0.05-0.2); `[]` = "
          "no experiment",
          0.0, 1.0),
      with_note(key("lia.minority.class", T::integer, "0", "the class the validators lack", 0),
                "a class of the data"),
      key("lia.minority.runs", T::integer, "64", "newcomers per fraction (LIA: 512)", 1),
  });
}

namespace {
// fluence lia fits M0 and the frozen body on the server's rows and feeds them every party's rows,
// so one encoding must serve all: "public" takes it from the rows no participant holds (its own
// public split or warm-up, not data.public_fraction), and "per_client" has no place here.
void check_lia_scaling(const Deck& deck) {
  const std::string scaling = deck.string("data.numeric_scaling");
  if (scaling == "per_client")
    throw InputError(fmt::format(
        "{}: data.numeric_scaling = \"per_client\" is not available in fluence lia (M0 and the "
        "frozen body are fitted on the server's rows and read every participant's with one "
        "encoding): use \"public\" (statistics of lia.public_fraction's split, else of the "
        "warm-up) or \"none\"",
        deck.where("data.numeric_scaling")));
  const double fraction = deck.real("data.public_fraction");
  if (fraction > 0.0)
    throw InputError(fmt::format(
        "{}: data.public_fraction = {} does not apply to fluence lia, whose rows held by no "
        "participant are lia.public_fraction's split and the warm-up (lia.warmup_fraction): set "
        "it to 0",
        deck.where("data.public_fraction"), fraction));
}
}  // namespace

LiaConfig LiaConfig::from_deck(const Deck& deck, int classes) {
  LiaConfig c;
  c.participants = static_cast<int>(deck.integer("lia.participants"));
  c.train_size = static_cast<int>(deck.integer("lia.train_size"));
  c.validation_size = static_cast<int>(deck.integer("lia.validation_size"));
  c.validation_mix = deck.string("lia.validation_mix");
  c.warmup_fraction = deck.real("lia.warmup_fraction");
  c.public_fraction = deck.real("lia.public_fraction");
  c.alpha = single_level(deck, "lia.alpha");
  c.corrupted_fraction = deck.real("lia.corrupted_fraction");
  c.corruption = deck.string("lia.corruption");
  c.corruption_rate = deck.real("lia.corruption_rate");
  c.local_epochs = static_cast<int>(deck.integer("lia.local_epochs"));
  c.batch_size = static_cast<int>(deck.integer("lia.batch_size"));
  c.learning_rate = deck.real("lia.learning_rate");
  const double fl_learning_rate = deck.real("lia.fl_learning_rate");
  c.fl_learning_rate = fl_learning_rate > 0.0 ? fl_learning_rate : c.learning_rate;
  c.clip = deck.real("lia.clip");
  c.epsilon_train = single_level(deck, "lia.epsilon_train");
  c.delta = deck.real("lia.delta");
  c.epsilon_vote = single_level(deck, "lia.epsilon_vote");
  c.vote_accounting = deck.string("lia.vote_accounting");
  c.vote_baseline = deck.string("lia.vote_baseline");
  c.vote_loss = deck.string("lia.vote_loss");
  c.relevance = deck.string("lia.relevance");
  c.relevance_epsilon = single_level(deck, "lia.relevance_epsilon");
  c.relevance_power = deck.real("lia.relevance_power");
  c.vote_quantile = c.vote_baseline == "median" ? 0.5 : deck.real("lia.vote_quantile");
  c.validators_per_contributor = static_cast<int>(deck.integer("lia.validators_per_contributor"));
  c.validation_subsets = static_cast<int>(deck.integer("lia.validation_subsets"));
  c.validation_split = deck.string("lia.validation_split");
  c.mode = deck.string("lia.mode");
  c.body = deck.string("lia.body");
  c.hidden = static_cast<int>(deck.integer("lia.hidden"));
  c.body_epochs = static_cast<int>(deck.integer("lia.body_epochs"));
  c.body_learning_rate = deck.real("lia.body_learning_rate");
  c.body_center = deck.boolean("lia.body_center");
  c.threshold = deck.string("lia.threshold");
  c.rounds = static_cast<int>(deck.integer("lia.rounds"));
  c.methods = deck.strings("lia.methods");
  c.cc_tau = deck.real("lia.cc_tau");
  c.cc_iterations = static_cast<int>(deck.integer("lia.cc_iterations"));
  c.sign_check = static_cast<int>(deck.integer("lia.sign_check"));
  c.retrain_tolerance = deck.real("lia.retrain_tolerance");
  c.minority_fractions = deck.reals("lia.minority.fractions");
  c.minority_class = static_cast<int>(deck.integer("lia.minority.class"));
  c.minority_runs = static_cast<int>(deck.integer("lia.minority.runs"));
  c.l2 = deck.real("model.l2");

  if (!(c.l2 > 0.0))
    throw InputError(fmt::format(
        "{}: model.l2 = {} but fluence lia needs model.l2 > 0 (M0 and the exact-influence "
        "retrains are the unique minimizers of the regularized loss)",
        deck.where("model.l2"), c.l2));
  // The last layer is always the logistic model; a network of [model] can only be the body.
  const std::string model = deck.string("model.type");
  if ((c.body == "network") != (model != "logistic"))
    throw InputError(fmt::format(
        "{}: lia.body = \"{}\" with model.type = \"{}\": fluence lia trains the last layer as "
        "a logistic regression on a frozen body, so a network of [model] is the body: use "
        "lia.body = \"network\" with model.type = \"mlp\" or \"cnn\", and lia.body = "
        "\"identity\" or \"mlp\" with model.type = \"logistic\"",
        deck.where("lia.body"), c.body, model));
  if (c.public_fraction > 0.0 && c.body == "identity")
    throw InputError(fmt::format(
        "{}: lia.public_fraction = {} with lia.body = \"identity\": the public split trains a "
        "body, so it needs lia.body = \"mlp\" or \"network\" (or lia.public_fraction = 0)",
        deck.where("lia.public_fraction"), c.public_fraction));
  check_lia_scaling(deck);
  if (!(c.public_fraction + c.warmup_fraction < 1.0))
    throw InputError(fmt::format(
        "{}: lia.public_fraction + lia.warmup_fraction = {} leaves no rows for the participants: "
        "their sum must be below 1",
        deck.where("lia.public_fraction"), c.public_fraction + c.warmup_fraction));
  if (std::isfinite(c.epsilon_train) && c.clip <= 0.0)
    throw InputError(fmt::format(
        "{}: lia.clip = 0 (no clipping) leaves DP-SGD without a sensitivity bound; set lia.clip > "
        "0 or lia.epsilon_train = \"inf\"",
        deck.where("lia.clip")));
  // The histograms are released on top of DP-SGD and the votes, so they are paid from the same
  // budgets (basic composition); a histogram without noise fits only budgets without limit.
  for (const auto& [budget, name] : {std::pair{c.epsilon_train, "lia.epsilon_train"},
                                     std::pair{c.epsilon_vote, "lia.epsilon_vote"}})
    if (c.relevance_weighted() && std::isfinite(budget) && !(c.relevance_epsilon < budget))
      throw InputError(fmt::format(
          "{}: lia.relevance_epsilon = {} must be below {} = {}: the relevance histogram is paid "
          "from that budget (\"inf\" only when the budget is \"inf\")",
          deck.where("lia.relevance_epsilon"), c.relevance_epsilon, name, budget));
  if (c.validators_per_contributor >= c.participants)
    throw InputError(
        fmt::format("{}: lia.validators_per_contributor = {} but a contributor has only {} other "
                    "participants (lia.participants - 1); 0 means all of them",
                    deck.where("lia.validators_per_contributor"), c.validators_per_contributor,
                    c.participants - 1));
  if (c.validation_subsets > c.validation_size)
    throw InputError(
        fmt::format("{}: lia.validation_subsets = {} exceeds lia.validation_size = {} (each subset "
                    "needs a row)",
                    deck.where("lia.validation_subsets"), c.validation_subsets, c.validation_size));
  // One subset would make "disjoint" the shared split under another name.
  if (c.disjoint_split() && c.validation_subsets < 2)
    throw InputError(fmt::format(
        "{}: lia.validation_split = \"disjoint\" needs lia.validation_subsets >= 2 (it is {}): "
        "each validator deals its votes to that many disjoint subsets of its validation set",
        deck.where("lia.validation_split"), c.validation_subsets));
  if (c.per_round() && c.rounds < 1)
    throw InputError(fmt::format(
        "{}: lia.mode = \"per_round\" filters the contributors of every FL round and needs "
        "lia.rounds >= 1 (it is 0)",
        deck.where("lia.mode")));
  if (c.sign_check > c.participants)
    throw InputError(fmt::format("{}: lia.sign_check = {} exceeds lia.participants = {}",
                                 deck.where("lia.sign_check"), c.sign_check, c.participants));
  if (c.minority_class >= classes)
    throw InputError(fmt::format("{}: lia.minority.class = {} but the data have {} classes (0-{})",
                                 deck.where("lia.minority.class"), c.minority_class, classes,
                                 classes - 1));
  return c;
}

double LiaConfig::vote_flip_probability() const {
  return lia::vote_flip_probability(after_relevance(epsilon_vote), vote_accounting == "seed");
}

double LiaConfig::after_relevance(double epsilon) const {
  return relevance_weighted() && std::isfinite(epsilon) ? epsilon - relevance_epsilon : epsilon;
}

}  // namespace fluence::lia
