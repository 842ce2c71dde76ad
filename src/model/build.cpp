#include "fluence/model/build.hpp"

#include <fmt/format.h>

#include "fluence/core/config.hpp"
#include "fluence/core/error.hpp"
#include "fluence/model/network.hpp"
#include "fluence/model/softmax_regression.hpp"

namespace fluence {

namespace {

std::vector<int> integers_of(const Deck& deck, const std::string& path) {
  std::vector<int> values;
  for (long value : deck.integers(path)) {
    if (value > (1 << 24))
      throw InputError(fmt::format("{}: {} holds {}, more than the {} allowed", deck.where(path),
                                   path, value, 1 << 24));
    values.push_back(static_cast<int>(value));
  }
  return values;
}

Shape input_shape(const Deck& deck, int features, std::array<int, 3> image) {
  const std::vector<int> given = integers_of(deck, "model.input_shape");
  if (!given.empty() && given.size() != 3)
    throw InputError(
        fmt::format("{}: model.input_shape has {} entries; expected [height, width, "
                    "channels]",
                    deck.where("model.input_shape"), given.size()));
  Shape shape;
  if (!given.empty())
    shape = {given[0], given[1], given[2]};
  else if (image[0] > 0)
    shape = {image[0], image[1], image[2]};
  else
    throw InputError(
        "model.type = \"cnn\" needs images: these data are not (only data.source = \"idx\" is), "
        "so set model.input_shape = [height, width, channels] for rows that are images in "
        "channels-last order");
  if (shape.size() != static_cast<std::size_t>(features))
    throw InputError(fmt::format(
        "model.type = \"cnn\": an input of {}x{}x{} is {} values, but the encoded rows have {} "
        "columns{}",
        shape.height, shape.width, shape.channels, shape.size(), features,
        given.empty() ? " (categorical attributes such as data.ink_levels add one-hot columns)"
                      : "; fix model.input_shape"));
  return shape;
}

}  // namespace

bool model_encodes_bias(const Deck& deck) {
  return deck.string("model.type") == "logistic" && deck.boolean("model.bias");
}

std::unique_ptr<Model> build_model(const Deck& deck, int features, std::array<int, 3> image,
                                   int classes) {
  const std::string type = deck.string("model.type");
  const double l2 = deck.real("model.l2");
  if (type == "logistic") return std::make_unique<SoftmaxRegression>(features, classes, l2);
  const Activation activation =
      deck.string("model.activation") == "tanh" ? Activation::tanh : Activation::relu;
  const std::vector<int> hidden = integers_of(deck, "model.hidden");
  const bool bias = deck.boolean("model.bias");
  NetworkSpec spec;
  if (type == "mlp") {
    spec = NetworkSpec::mlp(features, hidden, activation, classes, bias);
  } else {
    const Shape shape = input_shape(deck, features, image);
    const long kernel = deck.integer("model.conv_kernel");
    const bool same = deck.string("model.conv_padding") == "same";
    if (same && kernel % 2 == 0)
      throw InputError(fmt::format(
          "{}: model.conv_kernel = {} with model.conv_padding = \"same\": same padding needs an "
          "odd kernel ((k-1)/2 zeros per side)",
          deck.where("model.conv_kernel"), kernel));
    if (kernel > std::min(shape.height, shape.width) + (same ? kernel : 0))
      throw InputError(fmt::format("{}: model.conv_kernel = {} exceeds the {}x{} input",
                                   deck.where("model.conv_kernel"), kernel, shape.height,
                                   shape.width));
    spec = NetworkSpec::cnn(shape, integers_of(deck, "model.conv_filters"),
                            static_cast<int>(kernel), same ? Padding::same : Padding::valid,
                            deck.boolean("model.conv_pool"), hidden, activation, classes, bias);
  }
  if (deck.string("model.conv_algorithm") == "im2col") spec.convolution = ConvolutionMethod::im2col;
  const std::string init = deck.string("model.init");
  if (init != "auto")
    spec.initialization = init == "he" ? Initialization::he : Initialization::glorot;
  try {
    return std::make_unique<Network>(spec, classes, l2);
  } catch (const std::invalid_argument& error) {
    throw InputError(
        fmt::format("model.type = \"{}\": {} (model.conv_filters, model.conv_kernel, "
                    "model.conv_padding, model.conv_pool)",
                    type, error.what()));
  }
}

}  // namespace fluence
