#pragma once
// The model of a deck's [model] section.
#include <array>
#include <memory>

#include "fluence/model/model.hpp"

namespace fluence {

class Deck;
class DeckSchema;

/// Declares the [model] keys build_model reads: type, default, range and meaning of each
/// (inputs/README.md's tables).
void register_model_keys(DeckSchema& schema);

/// Does model.type take a constant-1 bias column in its encoded inputs? (The logistic model's
/// intercept; a network's layers hold their own biases.)
bool model_encodes_bias(const Deck& deck);

/// The model for `features` encoded input columns and `classes` classes. `image` is the data's
/// image shape (Table::image_shape; zeros when the rows are not images), which a cnn takes unless
/// model.input_shape is given. Settings that do not fit the data are InputErrors naming the key.
std::unique_ptr<Model> build_model(const Deck& deck, int features, std::array<int, 3> image,
                                   int classes);

}  // namespace fluence
