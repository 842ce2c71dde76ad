#pragma once
// The model of a deck's [model] section. Model kinds (model.type) are one ModelKindSpec each in a
// table (core/registry.hpp, docs/extending.md "A model kind"): build_model, model.type's choices
// and the bias column read it, so a new kind is its factory (a Model, or a NetworkSpec of layers)
// and one register_model_kind() call.
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fluence/model/model.hpp"
#include "fluence/model/network.hpp"

namespace fluence {

class Deck;
class DeckSchema;

/// What the data give a model: the encoded input columns, the data's image shape
/// (Table::image_shape; zeros when the rows are not images) and the classes.
struct ModelInputs {
  int features = 0;
  std::array<int, 3> image{};
  int classes = 0;
};

// Every member has an initializer, so that a spec written with designated initializers may leave
// any out (-Wmissing-field-initializers).
struct ModelKindSpec {
  std::string name{};  // model.type
  /// The [model] keys its factory reads beyond model.type (docs and `fluence keys` name the kinds
  /// in each key's meaning).
  std::vector<std::string> keys{};
  /// Takes model.bias as a constant-1 column of its encoded inputs (the logistic model's
  /// intercept); a network's layers hold their own biases.
  bool bias_column = false;
  /// The model; settings that do not fit the data are InputErrors naming the key.
  std::function<std::unique_ptr<Model>(const Deck& deck, const ModelInputs& inputs)> create{};
};

/// Adds a model kind (a later spec of the same name replaces the earlier one); before the deck
/// schema is first used (model.type's choices are the registered names).
void register_model_kind(ModelKindSpec spec);
/// The kinds in model.type's order: logistic, mlp, cnn, then those registered later.
std::vector<ModelKindSpec> registered_model_kinds();
std::vector<std::string> model_kind_names();

/// The settings every network kind shares: model.hidden, model.activation and model.bias.
struct NetworkSettings {
  std::vector<int> hidden;
  Activation activation = Activation::relu;
  bool bias = true;
  static NetworkSettings from_deck(const Deck& deck);
};

/// A network kind's model from its layers: `spec.type` named model.type, model.init and
/// model.conv_algorithm applied, a layer that does not fit its input an InputError naming the
/// kind.
std::unique_ptr<Model> build_network(const Deck& deck, NetworkSpec spec, int classes);

/// Declares the [model] keys build_model reads: type, default, range and meaning of each
/// (inputs/README.md's tables).
void register_model_keys(DeckSchema& schema);

/// Does model.type take a constant-1 bias column in its encoded inputs? (ModelKindSpec::bias_column
/// and model.bias.)
bool model_encodes_bias(const Deck& deck);

/// The model for `features` encoded input columns and `classes` classes. `image` is the data's
/// image shape (Table::image_shape; zeros when the rows are not images), which a cnn takes unless
/// model.input_shape is given. Settings that do not fit the data are InputErrors naming the key.
std::unique_ptr<Model> build_model(const Deck& deck, int features, std::array<int, 3> image,
                                   int classes);

}  // namespace fluence
