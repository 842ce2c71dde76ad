#include "fluence/io/model_input.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <hdf5.h>

#include <filesystem>
#include <optional>

#include "fluence/core/error.hpp"
#include "fluence/core/mpi.hpp"
#include "silent_hdf5.hpp"
#include "string_attribute.hpp"

namespace fluence {

namespace {

using io_detail::read_string_attribute;

// Names a results file keeps in a dataset (every model since issue 41, whatever their number) or,
// in older files, only in an attribute of /model/theta.
std::vector<std::string> stored_names(hid_t file, hid_t theta, const char* dataset,
                                      const char* attribute) {
  if (H5Lexists(file, dataset, H5P_DEFAULT) > 0)
    return io_detail::read_string_dataset(file, dataset);
  return read_string_attribute(theta, attribute);
}

// Whether the trained parameters depend on the key: the run seed and the sections that make the
// data, the clients and the model and train it, but not the keys that only evaluate it.
bool model_depends_on(const std::string& path, bool synthetic) {
  if (path == "federation.eval_train_loss" || path == "data.max_test_rows") return false;
  if (path.rfind("data.synthetic.", 0) == 0) return synthetic;
  if (path == "seed") return true;
  for (const char* section : {"data.", "partition.", "model.", "ldp.", "federation."})
    if (path.rfind(section, 0) == 0) return true;
  return false;
}

// Whether two decks give `spec` the same value: numbers as numbers (2 and 2.0 are one value),
// privacy levels as levels, everything else as TOML text.
bool same_value(const KeySpec& spec, const Deck& a, const Deck& b) {
  const std::string& path = spec.path;
  if (a.has(path) != b.has(path)) return false;
  if (!a.has(path)) return true;
  if (spec.type == KeyType::real) return a.real(path) == b.real(path);
  if (spec.type == KeyType::real_array) return a.reals(path) == b.reals(path);
  if (spec.type == KeyType::epsilon) {
    const EpsilonSpec x = a.epsilon(path), y = b.epsilon(path);
    return x.all == y.all && x.by_attribute == y.by_attribute;
  }
  return a.value_text(path) == b.value_text(path);
}

// The keys the trained model depends on whose values differ between the deck it was trained with
// and this one, each as "key = VALUE there, VALUE here".
std::vector<std::string> model_deck_differences(const Deck& trained, const Deck& deck) {
  const bool synthetic =
      trained.string("data.source") == "synthetic" || deck.string("data.source") == "synthetic";
  auto shown = [](const Deck& d, const std::string& path) {
    return d.has(path) ? message_excerpt(d.value_text(path)) : std::string("(not set)");
  };
  std::vector<std::string> differences;
  for (const auto& spec : deck.schema()) {
    if (spec.type == KeyType::section || spec.path.find("[]") != std::string::npos) continue;
    if (!model_depends_on(spec.path, synthetic) || same_value(spec, trained, deck)) continue;
    differences.push_back(fmt::format("{} = {} there, {} here", spec.path,
                                      shown(trained, spec.path), shown(deck, spec.path)));
  }
  return differences;
}

// Why the model in `file` is not the one this deck trains ("" when it is): the deck it was
// trained with differs in a key the model depends on, or a `fluence train` trained it privately.
std::string trained_deck_problem(hid_t file, const Deck& deck, bool private_allowed) {
  const auto text = read_string_attribute(file, "deck");
  if (text.empty()) return "it holds no deck (not a Fluence results file)";
  std::optional<Deck> trained;
  try {
    trained = Deck::from_string(text.front(), "its deck", deck.schema());
  } catch (const InputError& error) {
    return fmt::format("its deck cannot be read ({})", error.what());
  }
  const auto invocation = read_string_attribute(file, "command");
  const bool by_train = !invocation.empty() && invocation.front().rfind("fluence train ", 0) == 0;
  for (const char* key : {"privacy.mode", "personalization.method"})
    if (by_train && !private_allowed && trained->string(key) != "none")
      return fmt::format(
          "`fluence train` trained it privately ({} = \"{}\"), and this command trains plain "
          "FedAvg",
          key, trained->string(key));
  const auto differences = model_deck_differences(*trained, deck);
  if (differences.empty()) return "";
  constexpr std::size_t kNamed = 4;
  std::string named;
  for (std::size_t i = 0; i < differences.size() && i < kNamed; ++i)
    named += (i == 0 ? "" : "; ") + differences[i];
  if (differences.size() > kNamed)
    named += fmt::format("; and {} more", differences.size() - kNamed);
  return fmt::format(
      "it was trained with another deck: {} (the model depends on seed, [data], [partition], "
      "[model], [ldp] and [federation])",
      named);
}

std::vector<double> read_on_root(const std::string& path, const FederatedProblem& problem,
                                 const Deck& deck, bool private_allowed) {
  if (!std::filesystem::is_regular_file(path))
    throw InputError(fmt::format("--model {}: no such file", path));
  SilentHdf5 silent;
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t set = file >= 0 ? H5Dopen2(file, "/model/theta", H5P_DEFAULT) : -1;
  if (file < 0) throw InputError(fmt::format("--model {}: not an HDF5 file", path));
  if (set < 0) {
    H5Fclose(file);
    throw InputError(
        fmt::format("--model {}: no /model/theta (not a `fluence train` results file)", path));
  }
  const auto& model = *problem.model;
  hid_t space = H5Dget_space(set);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  H5Sclose(space);
  const std::vector<std::size_t> expected = model.theta_shape();
  std::vector<double> theta;
  std::string problem_text;
  const std::string stored_model = [&] {
    const auto text = read_string_attribute(set, "model");
    return text.empty() ? std::string("logistic") : text.front();
  }();
  if (dims.size() != expected.size() || !std::equal(dims.begin(), dims.end(), expected.begin())) {
    problem_text = fmt::format("/model/theta has shape [{}], the deck's model is [{}]",
                               fmt::join(dims, ", "), fmt::join(expected, ", "));
  } else if (!model.linear() && stored_model != model.describe()) {
    problem_text = fmt::format("it holds the model \"{}\", the deck's is \"{}\"", stored_model,
                               model.describe());
  } else if (stored_names(file, set, "/model/feature", "features") !=
             problem.encoding.column_names(problem.data.train)) {
    problem_text = "its encoded feature names differ from the deck's encoding";
  } else if (stored_names(file, set, "/model/class", "classes") != problem.data.train.class_names) {
    problem_text = "its class names differ from the deck's data";
  } else {
    problem_text = trained_deck_problem(file, deck, private_allowed);
  }
  if (problem_text.empty()) {
    theta.resize(model.parameters());
    if (H5Dread(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, theta.data()) < 0)
      problem_text = "/model/theta cannot be read";
  }
  H5Dclose(set);
  H5Fclose(file);
  if (!problem_text.empty())
    throw InputError(
        fmt::format("--model {}: {}; train it with the same deck", path, problem_text));
  return theta;
}

}  // namespace

std::vector<double> read_trained_theta(const std::string& path, const FederatedProblem& problem,
                                       const Deck& deck, bool private_allowed) {
  std::vector<double> theta(problem.model->parameters());
  collective_check([&] {
    if (world_rank() == 0) theta = read_on_root(path, problem, deck, private_allowed);
  });
  MPI_Bcast(theta.data(), static_cast<int>(theta.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return theta;
}

}  // namespace fluence
