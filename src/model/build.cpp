#include "fluence/model/build.hpp"

#include <fmt/format.h>

#include "fluence/core/config.hpp"
#include "fluence/core/deck_keys.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/registry.hpp"
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

void register_model_keys(DeckSchema& schema) {
  using namespace deck_keys;
  using T = KeyType;
  schema.add({
      section("model", "the model trained"),
      choice("model.type", "\"logistic\"", model_kind_names(),
             "multinomial logistic regression; a fully connected network (`mlp`: the inputs, "
             "`hidden` dense layers each followed by `activation`, a dense layer of C "
             "logits); a convolutional network (`cnn`: for each of `conv_filters`, a k × k "
             "convolution, the activation and, with `conv_pool`, 2 × 2 max-pooling; then "
             "flatten and the `mlp` part). Every model ends in the same softmax cross-entropy "
             "head (docs/math.md §10)"),
      key("model.l2", T::real, "0.001",
          "L2 coefficient lambda: objective + lambda/2 ‖theta‖^2 (every parameter, biases "
          "included)",
          0.0),
      key("model.bias", T::boolean, "true",
          "add a bias (intercept): per class (logistic: a constant-1 input column), per "
          "unit and per filter (mlp, cnn)"),
      key("model.hidden", T::integer_array, "[]",
          "mlp, cnn: widths of the hidden dense layers (`[]`: the logits come straight "
          "from the inputs, which for `mlp` is the logistic model)",
          1),
      choice("model.activation", "\"relu\"", {"relu", "tanh"},
             "mlp, cnn: the activation after every hidden dense layer and every convolution"),
      choice("model.init", "\"auto\"", {"auto", "he", "glorot"},
             "mlp, cnn: weights drawn N(0, 2/fan_in) ([He et al. "
             "2015](../docs/references.md#he-2015)) or U(±√(6/(fan_in + fan_out))) ([Glorot & "
             "Bengio 2010](../docs/references.md#glorot-bengio-2010)), each layer from its "
             "own stream of the run seed; `auto` = he for relu, glorot for tanh; biases start "
             "at 0 (the logistic model starts at 0)"),
      key("model.conv_filters", T::integer_array, "[32, 64]",
          "cnn: filters of each convolution layer, in order", 1),
      key("model.conv_kernel", T::integer, "5", "cnn: k of every k × k convolution (stride 1)", 1),
      choice("model.conv_padding", "\"same\"", {"same", "valid"},
             "cnn: `same` pads (k − 1)/2 zeros on each side (k must be odd), `valid` none"),
      key("model.conv_pool", T::boolean, "true",
          "cnn: 2 × 2 max-pooling with stride 2 after each convolution's activation (an "
          "odd last row or column is dropped)"),
      choice("model.conv_algorithm", "\"winograd\"", {"winograd", "im2col"},
             "cnn: how the float passes (local SGD with `federation.local_precision = "
             "\"single\"`, the per-round evaluation) run a convolution. `winograd`: "
             "Winograd's minimal filtering F(2×2, 5×5) or F(4×4, 3×3) ([Lavin & Gray "
             "2016](../docs/references.md#lavin-gray-2016)) for 5 × 5 and 3 × 3 kernels with "
             "at least 8 channels in and out, im2col + GEMM for the others (a first layer on "
             "grey images); 2.8× (5 × 5) or 4× (3 × 3) fewer multiplications, results within "
             "about 1e-6 relative of the direct sum (docs/math.md §10). `im2col`: im2col + "
             "GEMM for every convolution. The double passes (double-precision SGD, gradients, "
             "Hessian products, influence) always use im2col + GEMM"),
      key("model.input_shape", T::integer_array, "[]",
          "cnn: `[height, width, channels]` of an input image, channels last (`[]` = from "
          "the data: IDX images are `[28, 28, 1]`; other sources must give it, and height "
          "× width × channels must equal the encoded columns)",
          1),
  });
}

namespace {

std::unique_ptr<Model> build_mlp(const Deck& deck, const ModelInputs& inputs) {
  const NetworkSettings network = NetworkSettings::from_deck(deck);
  return build_network(deck,
                       NetworkSpec::mlp(inputs.features, network.hidden, network.activation,
                                        inputs.classes, network.bias),
                       inputs.classes);
}

std::unique_ptr<Model> build_cnn(const Deck& deck, const ModelInputs& inputs) {
  const NetworkSettings network = NetworkSettings::from_deck(deck);
  const Shape shape = input_shape(deck, inputs.features, inputs.image);
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
  return build_network(
      deck,
      NetworkSpec::cnn(shape, integers_of(deck, "model.conv_filters"), static_cast<int>(kernel),
                       same ? Padding::same : Padding::valid, deck.boolean("model.conv_pool"),
                       network.hidden, network.activation, inputs.classes, network.bias),
      inputs.classes);
}

Registry<ModelKindSpec>& registry() {
  // The built-ins in model.type's order, registered on first use (a static library drops none).
  static Registry<ModelKindSpec> instance(
      "a model kind",
      {{.name = "logistic",
        .keys = {"model.l2", "model.bias"},
        .bias_column = true,
        .create =
            [](const Deck& deck, const ModelInputs& inputs) {
              return std::unique_ptr<Model>(
                  new SoftmaxRegression(inputs.features, inputs.classes, deck.real("model.l2")));
            }},
       {.name = "mlp",
        .keys = {"model.l2", "model.bias", "model.hidden", "model.activation", "model.init"},
        .create = build_mlp},
       {.name = "cnn",
        .keys = {"model.l2", "model.bias", "model.hidden", "model.activation", "model.init",
                 "model.conv_filters", "model.conv_kernel", "model.conv_padding", "model.conv_pool",
                 "model.conv_algorithm", "model.input_shape"},
        .create = build_cnn}});
  return instance;
}

}  // namespace

void register_model_kind(ModelKindSpec spec) {
  if (!spec.create) throw InputError("register_model_kind: a model kind needs a factory");
  registry().add(std::move(spec));
}

std::vector<ModelKindSpec> registered_model_kinds() {
  return registry().specs();
}

std::vector<std::string> model_kind_names() {
  return registry().names();
}

NetworkSettings NetworkSettings::from_deck(const Deck& deck) {
  NetworkSettings settings;
  settings.activation =
      deck.string("model.activation") == "tanh" ? Activation::tanh : Activation::relu;
  settings.hidden = integers_of(deck, "model.hidden");
  settings.bias = deck.boolean("model.bias");
  return settings;
}

std::unique_ptr<Model> build_network(const Deck& deck, NetworkSpec spec, int classes) {
  const std::string type = deck.string("model.type");
  spec.type = type;
  if (deck.string("model.conv_algorithm") == "im2col") spec.convolution = ConvolutionMethod::im2col;
  const std::string init = deck.string("model.init");
  if (init != "auto")
    spec.initialization = init == "he" ? Initialization::he : Initialization::glorot;
  try {
    return std::make_unique<Network>(spec, classes, deck.real("model.l2"));
  } catch (const std::invalid_argument& error) {
    throw InputError(
        fmt::format("model.type = \"{}\": {} (model.conv_filters, model.conv_kernel, "
                    "model.conv_padding, model.conv_pool)",
                    type, error.what()));
  }
}

bool model_encodes_bias(const Deck& deck) {
  return registry().find(deck.string("model.type"), "model.type").bias_column &&
         deck.boolean("model.bias");
}

std::unique_ptr<Model> build_model(const Deck& deck, int features, std::array<int, 3> image,
                                   int classes) {
  return registry()
      .find(deck.string("model.type"), "model.type")
      .create(deck, {features, image, classes});
}

}  // namespace fluence
