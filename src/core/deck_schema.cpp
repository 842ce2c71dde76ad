// The deck schema: every key, its type, default, range and meaning. inputs/README.md documents each
// key (tests/core check that every path here appears there).
#include <limits>

#include "fluence/core/config.hpp"

namespace fluence {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

// The largest value an integer key takes unless its spec says otherwise: counts, sizes and ids are
// held in `int` (and passed to MPI and BLAS as int), so a deck value above INT_MAX is refused here,
// once, rather than wrapped by a cast later (a batch size of 2^40 was a segfault).
constexpr double kIntegerMaximum = static_cast<double>(std::numeric_limits<int>::max());

KeySpec key(std::string path, KeyType type, std::string default_value, std::string description,
            double minimum = -kInf, double maximum = kInf, bool minimum_exclusive = false) {
  const bool integral = type == KeyType::integer || type == KeyType::integer_array;
  if (integral && maximum == kInf) maximum = kIntegerMaximum;
  return KeySpec{std::move(path),        type,    std::move(default_value),
                 std::move(description), minimum, maximum,
                 minimum_exclusive,      false,   {}};
}

// A range whose upper end is excluded: PETSc refuses a relative tolerance of 1 (KSPSetTolerances),
// and a tolerance of 1 asks for nothing.
KeySpec below_maximum(KeySpec spec) {
  spec.maximum_exclusive = true;
  return spec;
}

KeySpec choice(std::string path, std::string default_value, std::vector<std::string> choices,
               std::string description) {
  KeySpec spec =
      key(std::move(path), KeyType::string, std::move(default_value), std::move(description));
  spec.choices = std::move(choices);
  return spec;
}

KeySpec with_choices(KeySpec spec, std::vector<std::string> choices) {
  spec.choices = std::move(choices);
  return spec;
}

KeySpec section(std::string path, std::string description) {
  return key(std::move(path), KeyType::section, "", std::move(description));
}

std::vector<KeySpec> build_schema() {
  using T = KeyType;
  return {
      // Any non-negative 64-bit integer (2^63 as a double bounds every TOML integer).
      key("seed", T::integer, "1", "run seed keying every random stream", 0, 0x1p63),

      section("data", "where the data come from and how they are encoded"),
      choice("data.source", "\"synthetic\"",
             {"synthetic", "csv", "arff", "idx", "hdf5", "tff", "leaf", "npy"}, "data source"),
      key("data.path", T::string, "",
          "training file (csv, arff, hdf5, tff), directory with the four IDX files (idx), LEAF "
          "train directory or .json file (leaf), .npz file or directory of .npy files (npy); a "
          "relative path is taken from the deck file's directory"),
      key("data.test_path", T::string, "",
          "separate test file or directory, laid out as data.path (every source but synthetic and "
          "idx); else test_fraction"),
      key("data.test_fraction", T::real, "0.2",
          "fraction of rows held out as the server's test set when there is no test file", 0.0, 1.0,
          true),
      key("data.label", T::string_or_integer, "",
          "label column (name or 0-based index) for csv/arff; default: the last column"),
      key("data.categorical", T::string_array, "[]",
          "csv: columns treated as categorical (the others must be numeric)"),
      key("data.features", T::string_array, "[]",
          "the attributes (columns) the model sees, by name ([] = every one but the label); csv "
          "reads no other column"),
      key("data.drop", T::string_array, "[]",
          "attributes (columns) left out, by name (instead of data.features); csv does not read "
          "them"),
      key("data.delimiter", T::string, "\",\"", "csv: the one character between fields"),
      choice("data.missing", "\"refuse\"", {"refuse", "drop"},
             "csv: a row with a missing value in a column that is read is refused (naming the "
             "line and column) or dropped"),
      key("data.missing_values", T::string_array,
          "[\"\", \"NA\", \"N/A\", \"NaN\", \"nan\", \"null\", \"?\"]",
          "csv: the field texts that count as a missing value"),
      choice("data.numeric_scaling", "\"standardize\"", {"standardize", "none"},
             "numeric features: standardized with training mean/std, or left as they are"),
      key("data.max_train_rows", T::integer, "0", "use only the first N training rows (0 = all)",
          0),
      key("data.max_test_rows", T::integer, "0", "use only the first N test rows (0 = all)", 0),
      key("data.ink_levels", T::integer, "0",
          "idx: add a categorical attribute \"ink\" with this many equal-frequency levels "
          "(q0, q1, ...) of an image's mean pixel intensity (0 = none)",
          0),
      key("data.classes", T::integer_array, "[]",
          "keep only training and test rows whose label is one of these 0-based class indices, "
          "relabelled 0, 1, ... in the listed order (at least 2 distinct; [] = every class)",
          0),

      section("data.arrays", "hdf5, npy, tff: which arrays hold the features, labels and clients"),
      key("data.arrays.features", T::string, "\"x\"",
          "the features: a dataset path (hdf5), an array name (npy) or a field name (tff)"),
      key("data.arrays.labels", T::string, "\"y\"",
          "the integer (or string) labels, one per row: named as data.arrays.features"),
      key("data.arrays.clients", T::string, "",
          "hdf5, npy: one client id (integer or string) per row, for partition.scheme = "
          "\"natural\""),
      key("data.arrays.names", T::string, "",
          "hdf5, npy: a 1-D array of strings naming the feature columns (default: the features' "
          "name and the column index, x0, x1, ...)"),
      key("data.arrays.names_attribute", T::string, "",
          "hdf5: a string-array attribute of the features dataset naming its columns"),
      key("data.arrays.test_features", T::string, "",
          "hdf5, npy: the test split's features (in data.test_path when given, else in data.path; "
          "with data.arrays.test_labels)"),
      key("data.arrays.test_labels", T::string, "", "hdf5, npy: the test split's labels"),

      section("data.synthetic", "synthetic generator with a planted multinomial logistic model"),
      key("data.synthetic.rows", T::integer, "10000", "rows generated (train + test)", 2),
      key("data.synthetic.numeric", T::integer, "4", "numeric attributes (standard normal)", 0),
      key("data.synthetic.categorical", T::integer_array, "[3, 4]",
          "domain size of each categorical attribute", 2),
      key("data.synthetic.classes", T::integer, "2", "label classes", 2),
      key("data.synthetic.signal", T::real, "2.0",
          "scale of the planted model's weights (larger = more separable)", 0.0),
      key("data.synthetic.label_offset", T::real, "0.0",
          "added to class 0's planted logit: shifts the classes' base rates (Adult: 76% class 0)"),
      key("data.synthetic.cat0_signal", T::real, "1.0",
          "multiplies cat0's planted weights: a group attribute strongly tied to the label "
          "(Adult's sex)",
          0.0),

      section("partition", "how training rows are divided among clients"),
      key("partition.clients", T::integer, "5",
          "number of clients N (natural, column: the data's count unless given)", 1),
      choice("partition.scheme", "\"iid\"",
             {"iid", "dirichlet", "label_shards", "column", "natural"}, "partition scheme"),
      key("partition.alpha", T::real, "0.5", "Dirichlet concentration over labels", 0.0, kInf,
          true),
      key("partition.shards_per_client", T::integer, "2",
          "label_shards: shards per client (seed 000 §5.1 / McMahan et al.)", 1),
      key("partition.column", T::string, "", "column: the categorical attribute to split on"),
      key("partition.local_test_fraction", T::real, "0.0",
          "fraction of every client's rows held out as its local test data (seed 004's "
          "Acc_g,p / Acc_l,p metrics)",
          0.0, 1.0),
      key("partition.sizes", T::real_array, "[]",
          "optional size skew: fraction of training rows per client (iid, dirichlet, label_shards)",
          0.0, kInf, true),

      section("model", "the model trained"),
      choice("model.type", "\"logistic\"", {"logistic", "mlp", "cnn"},
             "multinomial logistic regression, a fully connected network, or a convolutional "
             "network (docs/math.md §10)"),
      key("model.l2", T::real, "0.001", "L2 coefficient lambda: objective + lambda/2 ||theta||^2",
          0.0),
      key("model.bias", T::boolean, "true",
          "add a bias (intercept): per class (logistic), per unit and filter (mlp, cnn)"),
      key("model.hidden", T::integer_array, "[]",
          "mlp, cnn: widths of the hidden dense layers, each followed by the activation ([] = "
          "none: the logits come straight from the inputs or the convolutions)",
          1),
      choice("model.activation", "\"relu\"", {"relu", "tanh"},
             "mlp, cnn: the activation after every hidden dense layer and convolution"),
      choice("model.init", "\"auto\"", {"auto", "he", "glorot"},
             "mlp, cnn: weights drawn N(0, 2/fan_in) (he) or U(+-sqrt(6/(fan_in+fan_out))) "
             "(glorot); auto = he for relu, glorot for tanh; biases start at 0"),
      key("model.conv_filters", T::integer_array, "[32, 64]",
          "cnn: filters of each convolution layer, in order", 1),
      key("model.conv_kernel", T::integer, "5", "cnn: k of every k x k convolution (stride 1)", 1),
      choice("model.conv_padding", "\"same\"", {"same", "valid"},
             "cnn: same (zero-pad (k-1)/2 per side, odd k) or valid (no padding)"),
      key("model.conv_pool", T::boolean, "true",
          "cnn: a 2 x 2 max-pooling (stride 2) after every convolution's activation"),
      choice("model.conv_algorithm", "\"winograd\"", {"winograd", "im2col"},
             "cnn: how the float passes (single-precision local SGD, the per-round evaluation) "
             "run a convolution: Winograd's minimal filtering for 3 x 3 and 5 x 5 kernels with "
             ">= 8 channels in and out (im2col + GEMM for the others), or im2col + GEMM for all; "
             "the double passes always use im2col + GEMM"),
      key("model.input_shape", T::integer_array, "[]",
          "cnn: [height, width, channels] of the input images, channels last ([] = from the data: "
          "IDX images are [28, 28, 1])",
          1),

      section("ldp", "k-ary randomized response per client and attribute (seed 000 §3.2)"),
      key("ldp.attributes", T::string_array, "[]",
          "categorical attributes (and/or \"label\") randomized by each client"),
      key("ldp.epsilon", T::epsilon, "\"inf\"", "privacy level for every client"),
      key("ldp.client", T::section_array, "", "per-client overrides of epsilon"),
      key("ldp.client[].id", T::integer, "", "the client this override applies to", 0),
      key("ldp.client[].ids", T::integer_array, "", "several clients this override applies to", 0),
      key("ldp.client[].epsilon", T::epsilon, "", "their privacy level"),

      section("federation", "federated training (FedAvg, seed 000 Eq. 1-2)"),
      key("federation.rounds", T::integer, "50", "communication rounds T", 0),
      key("federation.local_epochs", T::integer, "1", "local epochs per round", 1),
      key("federation.batch_size", T::integer, "32", "local mini-batch size (sgd)", 1),
      key("federation.learning_rate", T::real, "0.1", "local step size", 0.0, kInf, true),
      choice("federation.local_precision", "\"double\"", {"double", "single"},
             "arithmetic of the clients' mini-batch SGD on byte-coded (image) data: double, or "
             "float32 as PyTorch's default (aggregation, noise and evaluation stay double)"),
      choice("federation.client_sampling", "\"all\"", {"all", "poisson", "fixed"},
             "clients in a FedAvg round: all, each with probability sampling_rate (poisson), or "
             "round(sampling_rate N) drawn without replacement (fixed, McMahan et al.'s C)"),
      key("federation.sampling_rate", T::real, "0.1",
          "client_sampling poisson or fixed: q (privacy.sampling_rate samples private training)",
          0.0, 1.0, true),
      choice("federation.optimizer", "\"sgd\"", {"sgd", "gd"},
             "local optimizer: mini-batch SGD or full-batch gradient descent"),
      choice("federation.polish", "\"none\"", {"none", "newton"},
             "after the rounds: federated Newton steps to the exact minimizer"),
      key("federation.tolerance", T::real, "1e-10",
          "polish: stop when the gradient norm of the objective is below this", 0.0, kInf, true),
      key("federation.polish_max_steps", T::integer, "50", "polish: most Newton steps", 1),
      key("federation.eval_train_loss", T::boolean, "true",
          "evaluate the training objective at the global model every round"),

      section("privacy", "client-level DP: DP-FedAvg with adaptive clipping, FeO2 (seed 004)"),
      choice("privacy.mode", "\"none\"", {"none", "dp-fedavg", "feo2"},
             "none, DP-FedAvg (§2.1), or FeO2's opt-out aggregation (Algorithm 1)"),
      key("privacy.sampling_rate", T::real, "1.0",
          "q: each client is sampled per round with this probability (Poisson)", 0.0, 1.0, true),
      key("privacy.noise_multiplier", T::real, "1.0",
          "z: overall noise multiplier (updates and clipped count together)", 0.0),
      key("privacy.epsilon", T::real, "",
          "target eps over federation.rounds: z is solved for it (instead of noise_multiplier)",
          0.0, kInf, true),
      key("privacy.delta", T::real, "1e-5", "delta of the (eps, delta) guarantee", 0.0, 1.0, true),
      key("privacy.clip", T::real, "1.0",
          "S: clipping norm of client updates (initial if adaptive)", 0.0, kInf, true),
      key("privacy.adaptive_clip", T::boolean, "true",
          "adapt S to the target quantile of update norms (Andrew et al. 2019)"),
      key("privacy.target_quantile", T::real, "0.5", "kappa: target unclipped fraction", 0.0, 1.0),
      key("privacy.clip_learning_rate", T::real, "0.2", "eta_b: geometric step of S", 0.0),
      key("privacy.count_noise", T::real, "0.0",
          "z_b: noise std of the unclipped count (0 = expected sampled clients / 20)", 0.0),
      key("privacy.opt_out_fraction", T::real, "0.0",
          "FeO2: fraction rho_np of clients that opt out of DP", 0.0, 1.0),
      key("privacy.opt_out_label", T::integer, "-1",
          "FeO2 skewed variant: opt-out clients drawn among those holding this label (-1 = any)",
          -1),
      key("privacy.ratio", T::real, "1.0", "FeO2's r: weight of the private average", 0.0),
      choice("privacy.denominator", "\"expected\"", {"expected", "realized"},
             "divide the private sum by the expected (q N_p, McMahan et al.) or the realized "
             "number of sampled private clients (seed 004 Algorithm 1)"),

      section("personalization", "Ditto personal models (seed 004 §2.2)"),
      choice("personalization.method", "\"none\"", {"none", "ditto"},
             "none, or Ditto: every client keeps a personal model trained toward the global one"),
      key("personalization.lambda_private", T::real, "0.005",
          "lambda_p: Ditto's proximal weight for private clients", 0.0),
      key("personalization.lambda_opt_out", T::real, "0.005",
          "lambda_np: Ditto's proximal weight for opt-out clients", 0.0),
      key("personalization.learning_rate", T::real, "0.0",
          "eta_p: personal SGD step (0 = federation.learning_rate)", 0.0),
      key("personalization.metrics_every", T::integer, "1",
          "evaluate the /feo2 metrics every this many rounds (and after the last)", 1),

      section("feo2_theory", "`fluence feo2-theory`: federated point estimation (seed 004 §4)"),
      key("feo2_theory.clients", T::integer, "100", "N clients", 2),
      key("feo2_theory.opt_out_fraction", T::real, "0.1", "rho_np: fraction of opt-out clients",
          0.0, 1.0),
      key("feo2_theory.samples", T::integer, "20", "n_s samples per client", 1),
      key("feo2_theory.tau2", T::real, "1.0", "tau^2: variance of the clients' points phi_j", 0.0),
      key("feo2_theory.beta2", T::real, "1.0", "beta^2: variance of a sample around phi_j", 0.0),
      key("feo2_theory.gamma2", T::real, "0.01",
          "gamma^2: the privacy noise variance at the server (a private client adds N(0, N_p "
          "gamma^2))",
          0.0),
      key("feo2_theory.ratios", T::real_array, "[0.0, 0.01, 0.1, 0.5, 0.9, 1.0]",
          "the ratios r simulated (r* is added)", 0.0),
      key("feo2_theory.trials", T::integer, "20000", "independent rounds simulated", 1),

      section("influence",
              "influence functions: Hessian, IHVP solvers, estimators (seeds 000, 001)"),
      choice("influence.hessian", "\"federated\"", {"federated", "client"},
             "Hessian scope: the whole objective (collective) or each client's local data only"),
      key("influence.damping", T::real, "0.0", "added to the Hessian's diagonal (H + damping I)",
          0.0),
      key("influence.auto_damping", T::boolean, "true",
          "when the spectrum shows H is not positive definite, add the documented damping"),
      choice("influence.solver", "\"cg\"", {"cg", "explicit", "lissa", "lowrank"}, "IHVP solver"),
      below_maximum(key("influence.rtol", T::real, "1e-10",
                        "cg: stop when ||b - H x|| <= rtol ||b|| (PETSc -ihvp_ksp_rtol overrides)",
                        0.0, 1.0, true)),
      key("influence.max_iterations", T::integer, "0", "cg: most iterations (0 = 10 p + 100)", 0),
      choice("influence.preconditioner", "\"auto\"", {"auto", "jacobi", "none"},
             "cg: preconditioner: Jacobi from the exact Hessian diagonal (the logistic model's), "
             "or none; auto = jacobi for logistic, none for networks"),
      key("influence.warm_start", T::boolean, "true",
          "cg: start each solve from the projection onto earlier solutions"),
      key("influence.explicit_max_parameters", T::integer, "6000",
          "explicit: refuse larger p (the dense Hessian needs 8 p^2 bytes per rank)", 1),
      section("influence.lissa", "LiSSA stochastic estimation (seed 001 Table I, SE)"),
      key("influence.lissa.scale", T::real, "0.0",
          "recursion scale (must exceed the largest eigenvalue); 0 = 1.5 x a power-iteration "
          "estimate",
          0.0),
      key("influence.lissa.depth", T::integer, "5000", "recursion depth r", 1),
      key("influence.lissa.repeats", T::integer, "1", "independent recursions t averaged", 1),
      key("influence.lissa.batch", T::integer, "0",
          "rows per stochastic Hessian sample (0 = exact Hessian, deterministic)", 0),
      key("influence.lissa.divergence_limit", T::real, "1e8",
          "abort when ||h_j|| exceeds this multiple of ||b|| / scale", 1.0),
      key("influence.lowrank_rank", T::integer, "20", "lowrank: eigenpairs k", 1),
      key("influence.spectrum", T::boolean, "true",
          "compute the smallest and largest Hessian eigenvalues with SLEPc"),
      below_maximum(key("influence.eigen_tolerance", T::real, "1e-8", "SLEPc relative tolerance",
                        0.0, 1.0, true)),
      choice("influence.removal_gradient", "\"regularized\"", {"regularized", "loss"},
             "per-point gradient of a removal: with its share of the L2 term (exact for "
             "retraining) or the seeds' loss-only variant"),
      key("influence.vectors", T::boolean, "true",
          "solve and write every client's parameter-change vector [clients x parameters]"),
      key("influence.retrain", T::boolean, "false",
          "check the estimates against exact retraining without each client"),
      choice("influence.retrain_mode", "\"newton\"", {"newton", "full", "warm"},
             "retraining: Newton from the trained model to federation.tolerance (the exact "
             "minimizer, fast; for a network a damped local Newton), the full federation schedule "
             "from the start, or the federation schedule again from the trained model (warm)"),

      section("fldp",
              "clients change their privacy level (or leave) after training (seed 000, FLDP-FL)"),
      key("fldp.change", T::section_array, "",
          "one case made of every [[fldp.change]]: changes applied together (seed 000 Eq. 20)"),
      key("fldp.change[].client", T::integer, "", "the client that changes", 0),
      key("fldp.change[].epsilon", T::epsilon, "",
          "its new eps' (a number or \"inf\" for every ldp attribute, or a table per attribute)"),
      key("fldp.change[].remove", T::boolean, "false",
          "the client leaves the federation instead (seed 000 Eq. 27)"),
      section("fldp.sweep", "a grid of cases: client counts x new epsilons (Q1-Q3)"),
      key("fldp.sweep.clients", T::integer_array, "[]",
          "the clients in the order they join the change (default 0, 1, ...)", 0),
      key("fldp.sweep.counts", T::integer_array, "[1]",
          "numbers of changing clients: a case per count takes the first ones of `clients`", 1),
      key("fldp.sweep.epsilon", T::real_array, "[]", "new eps' values, one case each", 0.0, kInf,
          true),
      key("fldp.sweep.attributes", T::string_array, "[]",
          "attributes the new eps' applies to (default: every ldp attribute)"),
      key("fldp.sweep.only_stricter", T::boolean, "true",
          "skip cells whose eps' is not below the clients' current eps (seed 000 §4.1)"),
      key("fldp.sweep.remove", T::boolean, "false",
          "also a removal case per count (the clients leave)"),
      key("fldp.retrain", T::boolean, "true",
          "compute the ground truths: the exact expected retrain and re-randomized retrains"),
      key("fldp.retrain_seeds", T::integer, "3",
          "independent re-randomizations retrained per case (seed 000 used 3)", 0),
      choice("fldp.retrain_mode", "\"newton\"", {"newton", "full"},
             "re-randomized retrains: Newton from the trained optimum to federation.tolerance, or "
             "the full federation schedule from zero (the seed's set-up; times Q4)"),
      key("fldp.newton_steps", T::integer, "0",
          "further Newton steps on the changed expected objective after the estimate", 0),
      choice("fldp.hessian_block", "\"full\"", {"full", "first"},
             "full Hessian, or seed 000 code's variant: the first class's diagonal block applied "
             "to every class row"),
      key("fldp.enumeration_limit", T::integer, "4096",
          "largest product of changed feature domains enumerated exactly (above: Monte Carlo)", 1),
      key("fldp.monte_carlo_samples", T::integer, "64",
          "Monte Carlo: k-RR draws per row (a multiple of monte_carlo_batches)", 2),
      key("fldp.monte_carlo_batches", T::integer, "8",
          "Monte Carlo: independent batches of draws; their spread gives the standard error", 2),

      section("whatif",
              "utility cost of eps-LDP on a group of records, for a grid of eps and group sizes "
              "(seed 001)"),
      section("whatif.group", "the group S: training records whose attribute has the value(s)"),
      key("whatif.group.attribute", T::string, "",
          "a categorical attribute, or \"label\" (required)"),
      key("whatif.group.value", T::string_or_integer, "",
          "the value selecting the group: a category name or 0-based index"),
      key("whatif.group.values", T::string_array, "",
          "several values (names or indices) selecting the group together"),
      key("whatif.fractions", T::real_array, "[]",
          "fractions k of the group perturbed ([] = 10 evenly spaced values 1%..30%, seed 001)",
          0.0, 1.0, true),
      key("whatif.epsilons", T::real_array, "[]",
          "eps grid ([] = 30 evenly spaced values 0.001..10, seed 001)", 0.0, kInf, true),
      key("whatif.attributes", T::string_array, "[\"label\"]",
          "attributes the rr variant randomizes: categorical features and/or \"label\""),
      key("whatif.variants", T::string_array, "[\"rr_l\", \"rr_flc\"]",
          "estimators: rr (Eq. 13), rr_l (labels, Eq. 14), rr_flc (labels with forward loss "
          "correction, Eq. 22)"),
      key("whatif.repeats", T::integer, "10", "ground truth: randomized retrains per cell", 1),
      key("whatif.retrain", T::boolean, "false",
          "compute the ground truth: randomize, retrain to the optimum, measure the test loss"),
      key("whatif.expected_retrain", T::boolean, "true",
          "with retrain: also retrain on the exact expected objective per cell"),
      key("whatif.test_sample", T::integer, "0",
          "S_te: this many test rows drawn at random (0 = the whole test set)", 0),
      choice("whatif.rr_form", "\"expected\"", {"expected", "paper"},
             "rr estimate: the exact expected loss change, or seed 001 Eq. 13's literal scaling"),
      choice("whatif.flc_form", "\"expected\"", {"expected", "paper"},
             "rr_flc estimate: the exact expected change, or seed 001 Eq. 22's literal terms"),
      choice("whatif.draws", "\"common\"", {"common", "independent"},
             "ground truth k-RR draws: shared by every eps (nested flips), or independent per eps"),
      key("whatif.second_order", T::boolean, "true",
          "also estimate to second order: per cell d theta = -(1/n) H^-1 b and "
          "g . d theta + d theta^T H_te d theta / 2 (one IHVP per cell)"),
      key("whatif.retrain_tolerance", T::real, "1e-8",
          "retrains stop when the gradient norm of the perturbed objective is below this", 0.0,
          kInf, true),
      key("whatif.retrain_max_iterations", T::integer, "200", "retrains: most Newton steps", 1),
      key("whatif.enumeration_limit", T::integer, "4096",
          "rr: largest product of the randomized features' domains (enumerated exactly)", 1),

      section("lia", "`fluence lia`: lazy-influence data filtering (seeds 002, 003)"),
      key("lia.participants", T::integer, "500",
          "participants P (each a contributor and a validator)", 3),
      key("lia.train_size", T::integer, "100", "each participant's training batch", 1),
      key("lia.validation_size", T::integer, "50", "each participant's validation set", 1),
      choice("lia.validation_mix", "\"participant\"", {"participant", "iid"},
             "a validation set's labels: the participant's Dirichlet mix, or the population's"),
      key("lia.warmup_fraction", T::real, "0.01",
          "share of the training rows the center keeps as warm-up data for M0", 0.0, 1.0, true),
      key("lia.public_fraction", T::real, "0",
          "share of the training rows held by no participant on which the body is trained "
          "(0: the body trains on the warm-up rows)",
          0.0, 1.0),
      key("lia.alpha", T::epsilon, "0.1",
          "Dirichlet concentration of each participant's label mix; \"inf\" = IID"),
      key("lia.corrupted_fraction", T::real, "0.3", "share of participants with corrupted batches",
          0.0, 1.0),
      choice("lia.corruption", "\"label_shift\"", {"label_shift", "random_label"},
             "label_shift: one fixed derangement of the labels; random_label: uniform labels"),
      key("lia.corruption_rate", T::real, "1.0", "share of a corrupted batch that is corrupted",
          0.0, 1.0),
      key("lia.local_epochs", T::integer, "3", "contributors' local DP-SGD epochs k", 1),
      key("lia.batch_size", T::integer, "10",
          "DP-SGD expected batch size B (Poisson sampling rate B / train_size)", 1),
      key("lia.learning_rate", T::real, "0.1", "local step size (DP-SGD and the FL comparison)",
          0.0, kInf, true),
      key("lia.clip", T::real, "1.0", "DP-SGD per-example clipping norm Delta (0 = none)", 0.0),
      key("lia.epsilon_train", T::epsilon, "1.0",
          "DP-SGD privacy of a contributor's batch at lia.delta; \"inf\" = no noise"),
      key("lia.delta", T::real, "1e-5", "DP-SGD delta", 0.0, 1.0, true),
      key("lia.epsilon_vote", T::epsilon, "1.0",
          "randomized-response privacy of each vote (Eq. 2-3); \"inf\" = votes sent as they are"),
      choice("lia.vote_accounting", "\"exact\"", {"exact", "seed"},
             "eps of a vote: exact ln((1-p/2)/(p/2)), or the seed's Eq. 3 (twice that)"),
      choice("lia.vote_baseline", "\"model\"", {"model", "median", "quantile"},
             "a vote is +1 when the loss difference exceeds 0 (Eq. 1), the validator's median "
             "difference over its contributors, or their lia.vote_quantile quantile"),
      choice("lia.vote_loss", "\"cross_entropy\"", {"cross_entropy", "zero_one"},
             "the loss L of Eq. 1: the model's cross-entropy, or the 0-1 loss (a vote compares "
             "how many validation rows each model classifies correctly)"),
      choice("lia.relevance", "\"none\"", {"none", "predicted_classes"},
             "how the center combines the votes on a contributor: their sum (seed 002), or a "
             "mean weighted by how much the validator's and the contributor's histograms of M0's "
             "predicted classes overlap (docs/math.md §9)"),
      key("lia.relevance_epsilon", T::epsilon, "0.2",
          "relevance = \"predicted_classes\": epsilon of each participant's Laplace-noised "
          "histogram, paid from lia.epsilon_train (batch) and lia.epsilon_vote (validation set)"),
      key("lia.relevance_power", T::real, "2.0",
          "relevance = \"predicted_classes\": a vote's weight is the histogram overlap to this "
          "power",
          0.0, kInf, true),
      key("lia.vote_quantile", T::real, "0.5",
          "vote_baseline = \"quantile\": the quantile q of a validator's differences (votes +1 "
          "for all but about the share q of its contributors that help it least)",
          0.0, 1.0, true),
      key("lia.validators_per_contributor", T::integer, "0",
          "validators drawn per contributor (0 = all other participants)", 0),
      key("lia.validation_subsets", T::integer, "1",
          "split each validation set into this many disjoint subsets; a vote uses one (§III-B3)", 1,
          255),
      choice("lia.validation_split", "\"shared\"", {"shared", "disjoint"},
             "which subset a vote reads: one drawn per (validator, contributor) pair, or each "
             "validator's votes dealt to its subsets in turn so that a median or quantile "
             "baseline is taken per subset (seed 002 §III-B3; parallel composition)"),
      choice("lia.mode", "\"single_shot\"", {"single_shot", "per_round"},
             "filter once before FL (seed 002), or also run FL that filters every round's "
             "contributors with the current global model (seed 003 Algorithm 1)"),
      choice("lia.body", "\"identity\"", {"identity", "mlp", "network"},
             "frozen body: none (the last layer is a logistic regression on the inputs), a "
             "one-hidden-layer ReLU MLP, or the [model] network (model.type = mlp or cnn), trained "
             "on the warm-up data without its last layer"),
      key("lia.hidden", T::integer, "64", "mlp body: hidden units", 1),
      key("lia.body_epochs", T::integer, "30",
          "mlp and network bodies: Adam epochs on the warm-up data", 1),
      key("lia.body_learning_rate", T::real, "0.01", "mlp and network bodies: Adam step size", 0.0,
          kInf, true),
      key("lia.body_center", T::boolean, "false",
          "mlp and network bodies: center the features on the mean over the rows the body was "
          "trained on"),
      choice("lia.threshold", "\"kmeans\"", {"kmeans", "mixture", "zero"},
             "acceptance threshold on the vote sums: 2-means midpoint (seed 002), the equal-"
             "posterior point of a 2-Gaussian mixture, or 0 (seed 003)"),
      key("lia.rounds", T::integer, "25", "FL rounds after filtering (0 = no FL comparison)", 0),
      with_choices(
          key("lia.methods", T::string_array,
              "[\"none\", \"oracle\", \"krum\", \"trimmed_mean\", "
              "\"centered_clipping\", \"lia\", \"lia_cc\"]",
              "FL methods compared (seed Fig. 3)"),
          {"none", "oracle", "krum", "trimmed_mean", "centered_clipping", "lia", "lia_cc"}),
      key("lia.cc_tau", T::real, "1.0", "centered clipping radius tau", 0.0, kInf, true),
      key("lia.cc_iterations", T::integer, "3", "centered clipping iterations per round", 1),
      key("lia.sign_check", T::integer, "0",
          "contributors whose exact influence (retraining) is compared with the votes (Fig. 9)", 0),
      key("lia.retrain_tolerance", T::real, "1e-8",
          "M0 and sign-check retrains: gradient-norm tolerance of Newton", 0.0, kInf, true),
      section("lia.minority", "minority experiment (seed §IV-E): validators lack one class"),
      key("lia.minority.fractions", T::real_array, "[]",
          "shares of the newcomer's batch from the missing class (empty = no experiment)", 0.0,
          1.0),
      key("lia.minority.class", T::integer, "0", "the class the validators lack", 0),
      key("lia.minority.runs", T::integer, "64", "newcomers drawn per fraction", 1),

      section("output", "where results go"),
      key("output.dir", T::string, "\"out\"", "output directory (results.h5 is written there)"),
      key("output.checkpoint_every", T::integer, "0",
          "write <dir>/chk_<n>.h5 every this many training rounds, and in influence, fldp and "
          "whatif every this many finished units of their sweeps (0 = only on a stop signal)",
          0),
      key("output.keep", T::integer, "2", "the newest checkpoints kept", 1),
  };
}
}  // namespace

const std::vector<KeySpec>& deck_schema() {
  static const std::vector<KeySpec> schema = build_schema();
  return schema;
}

}  // namespace fluence
