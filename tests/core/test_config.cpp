#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/error.hpp"

namespace fluence {
namespace {

// The message of the InputError `text` raises (empty when it parses).
std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  try {
    Deck::from_string(text, "deck.toml", deck_schema(), sets);
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

TEST(Deck, DefaultsFillEveryKeyThatHasOne) {
  const Deck deck = Deck::from_string("", "deck.toml", deck_schema());
  EXPECT_EQ(deck.integer("federation.rounds"), 50);
  EXPECT_EQ(deck.string("data.source"), "synthetic");
  EXPECT_DOUBLE_EQ(deck.real("model.l2"), 1e-3);
  EXPECT_EQ(deck.integers("data.synthetic.categorical"), (std::vector<long>{3, 4}));
  EXPECT_FALSE(deck.has("data.path"));
  EXPECT_NE(deck.resolved_toml().find("learning_rate"), std::string::npos);
}

TEST(Deck, GivenKeysAreTheDecksAndTheOverridesNotTheDefaults) {
  const Deck deck = Deck::from_string("[privacy]\nclip = 2.0\n", "deck.toml", deck_schema(),
                                      {"federation.rounds=3"});
  EXPECT_TRUE(deck.given("privacy.clip"));
  EXPECT_TRUE(deck.given("federation.rounds"));
  EXPECT_FALSE(deck.given("privacy.sampling_rate"));  // filled by its default
  EXPECT_TRUE(deck.has("privacy.sampling_rate"));
  EXPECT_EQ(deck.given_sections(), (std::vector<std::string>{"federation", "privacy"}));
}

TEST(Deck, UnknownKeySuggestsTheNearest) {
  const auto message = error_of("[federation]\nlearning_rat = 0.1\n");
  EXPECT_NE(message.find("deck.toml:2"), std::string::npos) << message;
  EXPECT_NE(message.find("unknown key 'federation.learning_rat'"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean 'federation.learning_rate'"), std::string::npos) << message;
}

TEST(Deck, WrongTypeNamesKeyValueAndAllowed) {
  const auto message = error_of("[federation]\nrounds = \"ten\"\n");
  EXPECT_NE(message.find("federation.rounds = \"ten\""), std::string::npos) << message;
  EXPECT_NE(message.find("expected an integer >= 0"), std::string::npos) << message;
}

TEST(Deck, OutOfRangeValuesAreRejected) {
  EXPECT_NE(error_of("[federation]\nlearning_rate = 0\n").find("a number > 0"), std::string::npos);
  EXPECT_NE(error_of("[federation]\nlearning_rate = -1.5\n").find("learning_rate"),
            std::string::npos);
  EXPECT_NE(error_of("[partition]\nalpha = 0.0\n").find("partition.alpha"), std::string::npos);
  EXPECT_NE(error_of("[data]\ntest_fraction = 1.5\n").find("<= 1"), std::string::npos);
  EXPECT_NE(error_of("[partition]\nscheme = \"random\"\n").find("one of: iid, dirichlet"),
            std::string::npos);
}

TEST(Deck, ToleranceOfOneIsRefusedBeforePetscRefusesIt) {
  // KSPSetTolerances refuses rtol >= 1 with an error stack (issue 24): the schema says so first.
  const auto rtol = error_of("[influence]\nrtol = 1\n");
  EXPECT_NE(rtol.find("influence.rtol = 1 is not allowed: expected a number > 0 and < 1"),
            std::string::npos)
      << rtol;
  EXPECT_NE(error_of("[influence]\neigen_tolerance = 1.0\n").find("< 1"), std::string::npos);
  EXPECT_EQ(error_of("[influence]\nrtol = 0.999\n"), "");
}

// Issue 24, message hygiene: deck strings are names and paths, so a control byte ("\u0000" cut the
// message where it stood) or a string longer than any path is refused, shown escaped and short.
TEST(Deck, StringsWithControlBytesOrOfMegabytesAreRefusedShort) {
  const auto nul = error_of("[data]\npath = \"a\\u0000b\"\n");
  EXPECT_NE(nul.find("deck.toml:2: data.path = \"a\\x00b\" is not allowed: expected a string of "
                     "at most 4096 bytes without control characters"),
            std::string::npos)
      << nul;
  const auto tab = error_of("[ldp]\nattributes = [\"cat0\", \"c\\tat1\"]\n");
  EXPECT_NE(tab.find("ldp.attributes = \"c\\x09at1\" is not allowed"), std::string::npos) << tab;
  const std::string long_path(20'000'000, 'p');
  const auto huge = error_of("", {"data.path=\"" + long_path + "\""});
  EXPECT_LT(huge.size(), 300u);
  EXPECT_NE(huge.find("data.path = \"" + std::string(59, 'p') +
                      "... (20000002 bytes) is not "
                      "allowed"),
            std::string::npos)
      << huge;
  const auto key = error_of("\"" + std::string(5000, 'k') + "\" = 1\n");
  EXPECT_NE(key.find("unknown key '" + std::string(60, 'k') + "... (5000 bytes)'"),
            std::string::npos)
      << key.substr(0, 300);
  EXPECT_EQ(error_of("[data]\npath = \"caf\u00e9/data.csv\"\n"), "");  // UTF-8 is text
}

TEST(Deck, IntegersAboveIntMaxAreRefusedUnlessTheKeyAllowsThem) {
  // The values of issue 24's crash reports: a batch size of 2^40 (was a segfault) and 2^32 + 3
  // rounds (ran 3 rounds and recorded 4294967299).
  const auto batch = error_of("[federation]\nbatch_size = 1099511627776\n");
  EXPECT_NE(batch.find("federation.batch_size = 1099511627776"), std::string::npos) << batch;
  EXPECT_NE(batch.find("<= 2147483647"), std::string::npos) << batch;
  EXPECT_NE(error_of("", {"federation.rounds=4294967299"}).find("federation.rounds"),
            std::string::npos);
  EXPECT_NE(error_of("[model]\nhidden = [200, 4294967296]\n").find("model.hidden"),
            std::string::npos);
  EXPECT_EQ(error_of("[federation]\nbatch_size = 2147483647\n"), "");
  // The seed keys streams with 64 bits.
  EXPECT_EQ(error_of("seed = 9223372036854775807\n"), "");
  // No integer key is left without an upper bound.
  for (const auto& spec : deck_schema()) {
    if (spec.type == KeyType::integer || spec.type == KeyType::integer_array) {
      EXPECT_TRUE(std::isfinite(spec.maximum)) << spec.path;
    }
  }
}

TEST(Deck, AWholeFloatForAnIntegerKeyIsShownAsAFloat) {
  // `clients = 5.0` was reported as "5 is not allowed"; the message must show what is wrong.
  const auto message = error_of("[partition]\nclients = 5.0\n");
  EXPECT_NE(message.find("partition.clients = 5.0 is not allowed: expected an integer"),
            std::string::npos)
      << message;
  EXPECT_NE(error_of("[federation]\nlearning_rate = -0.1\n").find("= -0.1 is not"),
            std::string::npos);
}

TEST(Deck, EpsilonMustBePositiveOrInf) {
  EXPECT_NE(error_of("[ldp]\nepsilon = 0\n").find("ldp.epsilon = 0"), std::string::npos);
  EXPECT_NE(error_of("[ldp]\nepsilon = -1\n").find("ldp.epsilon"), std::string::npos);
  EXPECT_NE(error_of("[ldp]\nepsilon = nan\n").find("ldp.epsilon = nan"), std::string::npos);
  EXPECT_NE(error_of("[ldp]\nepsilon = { label = 0 }\n").find("ldp.epsilon.label"),
            std::string::npos);
  EXPECT_EQ(error_of("[ldp]\nepsilon = \"inf\"\n"), "");
  EXPECT_EQ(error_of("[ldp]\nepsilon = inf\n"), "");
  const Deck deck =
      Deck::from_string("[ldp]\nepsilon = { cat0 = 1.5, label = \"inf\" }\n", "d", deck_schema());
  const auto spec = deck.epsilon("ldp.epsilon");
  EXPECT_DOUBLE_EQ(spec.for_attribute("cat0"), 1.5);
  EXPECT_TRUE(std::isinf(spec.for_attribute("label")));
}

// Issue 41: a number key refuses nan, inf and -inf, in the deck and through --set, naming the
// key, the value and that it must be finite (influence.damping = inf ran into a CG "relative
// residual -nan"); only a key declared with_infinity takes inf, and never -inf or nan.
TEST(Deck, NumberKeysRefuseNonFiniteValuesUnlessInfIsDocumented) {
  const auto damping = error_of("[influence]\ndamping = inf\n");
  EXPECT_NE(damping.find("deck.toml:2: influence.damping = inf is not allowed: expected a finite "
                         "number >= 0"),
            std::string::npos)
      << damping;
  EXPECT_NE(error_of("", {"feo2_theory.gamma2=inf"}).find("feo2_theory.gamma2 = inf"),
            std::string::npos);
  EXPECT_NE(error_of("", {"model.l2=nan"}).find("model.l2 = nan"), std::string::npos);
  const auto offset = error_of("[data.synthetic]\nlabel_offset = -inf\n");
  EXPECT_NE(offset.find("label_offset = -inf is not allowed: expected a finite number"),
            std::string::npos)
      << offset;
  const auto ratios = error_of("[feo2_theory]\nratios = [0.5, inf]\n");
  EXPECT_NE(ratios.find("feo2_theory.ratios = [0.5, inf] is not allowed: expected an array of "
                        "finite numbers, each >= 0"),
            std::string::npos)
      << ratios;
  EXPECT_NE(error_of("[whatif]\nepsilons = [nan]\n").find("whatif.epsilons = [nan]"),
            std::string::npos);
  // A finite value out of range keeps the plain wording.
  EXPECT_NE(error_of("[influence]\ndamping = -1.0\n").find("expected a number >= 0"),
            std::string::npos);
  // fldp.sweep.epsilon documents inf (the clients stop randomizing): inf passes, -inf and nan not.
  EXPECT_EQ(error_of("[fldp.sweep]\nepsilon = [0.5, inf]\n"), "");
  const auto sweep = error_of("[fldp.sweep]\nepsilon = [-inf]\n");
  EXPECT_NE(sweep.find("expected an array of finite numbers, each > 0 or inf"), std::string::npos)
      << sweep;
  EXPECT_NE(error_of("[fldp.sweep]\nepsilon = [nan]\n").find("fldp.sweep.epsilon = [nan]"),
            std::string::npos);
  // Every number key but the documented ones refuses inf; the documented ones say so.
  for (const auto& spec : deck_schema()) {
    if (spec.type != KeyType::real && spec.type != KeyType::real_array) continue;
    if (spec.path.find("[]") != std::string::npos) continue;  // inside an array of tables
    const std::string value = spec.type == KeyType::real ? "inf" : "[inf]";
    const bool refused = !error_of("", {spec.path + "=" + value}).empty();
    EXPECT_EQ(refused, !spec.infinity_allowed) << spec.path;
    EXPECT_EQ(allowed_text(spec).find("inf") != std::string::npos, spec.infinity_allowed)
        << spec.path;
  }
}

TEST(Deck, SyntaxErrorGivesLineAndColumn) {
  const auto message = error_of("seed = 1\n[data\nsource = \"csv\"\n");
  EXPECT_NE(message.find("deck.toml:2:"), std::string::npos) << message;
  EXPECT_NE(message.find("TOML syntax error"), std::string::npos) << message;
}

TEST(Deck, MissingFileIsAnInputError) {
  EXPECT_THROW(Deck::from_file("/nonexistent/deck.toml", deck_schema()), InputError);
  EXPECT_THROW(Deck::from_file("/tmp", deck_schema()), InputError);  // a directory is not a deck
}

TEST(Deck, SetOverridesAreValidatedLikeTheDeck) {
  const Deck deck = Deck::from_string(
      "[federation]\nrounds = 3\n", "d", deck_schema(),
      {"federation.rounds=9", "ldp.epsilon=inf", "data.source=csv", "ldp.attributes=[\"label\"]"});
  EXPECT_EQ(deck.integer("federation.rounds"), 9);
  EXPECT_EQ(deck.string("data.source"), "csv");  // a bare word is a string
  EXPECT_EQ(deck.strings("ldp.attributes"), std::vector<std::string>{"label"});
  EXPECT_NE(error_of("", {"federation.rounds=-2"}).find("federation.rounds"), std::string::npos);
  EXPECT_NE(error_of("", {"federaton.rounds=2"}).find("did you mean"), std::string::npos);
  EXPECT_NE(error_of("", {"novalue"}).find("section.key=value"), std::string::npos);
}

// Issue 41: a --set with a line break dropped what followed it, and a whole section reset the
// section's other keys to their defaults; both are refused, naming the --set.
TEST(Deck, SetRefusesLineBreaksAndWholeSections) {
  const auto line_break = error_of("", {"federation.rounds=2\nfederation.learning_rate=5"});
  EXPECT_NE(line_break.find("--set federation.rounds=2\\x0afederation.learning_rate=5: a --set "
                            "holds one section.key=value on one line"),
            std::string::npos)
      << line_break;
  EXPECT_NE(error_of("", {"data.path=\"a\"\r"}).find("line break"), std::string::npos);
  const auto section = error_of("[federation]\nlearning_rate = 0.5\n", {"federation={rounds=2}"});
  EXPECT_NE(section.find("--set federation={rounds=2}: [federation] is a section"),
            std::string::npos)
      << section;
  EXPECT_NE(error_of("", {"data.synthetic={rows=100}"}).find("[data.synthetic] is a section"),
            std::string::npos);
  // A table where the key takes one (a privacy level per attribute) is still a value.
  EXPECT_EQ(error_of("", {"ldp.epsilon={label=1.0}"}), "");
}

TEST(Deck, ArraysOfTablesAreValidatedPerElement) {
  const Deck deck = Deck::from_string(
      "[ldp]\nattributes=[\"label\"]\n[[ldp.client]]\nid = 2\nepsilon = 0.5\n[[ldp.client]]\n"
      "ids = [0, 1]\nepsilon = 1\n",
      "d", deck_schema());
  EXPECT_EQ(deck.array_size("ldp.client"), 2u);
  EXPECT_EQ(deck.integer("ldp.client[0].id"), 2);
  EXPECT_EQ(deck.integers("ldp.client[1].ids"), (std::vector<long>{0, 1}));
  EXPECT_NE(error_of("[[ldp.client]]\nidd = 2\n").find("ldp.client[0].idd"), std::string::npos);
}

TEST(EditDistance, CountsSingleCharacterEdits) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("same", "same"), 0u);
}

}  // namespace
}  // namespace fluence
