// [lia] of the deck -> LiaConfig, with the checks that need more than one key.
#include <fmt/core.h>

#include <cmath>

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
