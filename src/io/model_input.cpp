#include "fluence/io/model_input.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <hdf5.h>

#include <filesystem>

#include "fluence/core/error.hpp"
#include "fluence/core/mpi.hpp"
#include "string_attribute.hpp"

namespace fluence {

namespace {

using io_detail::read_string_attribute;

std::vector<double> read_on_root(const std::string& path, const FederatedProblem& problem) {
  if (!std::filesystem::is_regular_file(path))
    throw InputError(fmt::format("--model {}: no such file", path));
  H5E_auto2_t handler;
  void* data;
  H5Eget_auto2(H5E_DEFAULT, &handler, &data);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // report our own messages, not HDF5's stack
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t set = file >= 0 ? H5Dopen2(file, "/model/theta", H5P_DEFAULT) : -1;
  H5Eset_auto2(H5E_DEFAULT, handler, data);
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
  } else if (read_string_attribute(set, "features") !=
             problem.encoding.column_names(problem.data.train)) {
    problem_text = "its encoded feature names differ from the deck's encoding";
  } else if (read_string_attribute(set, "classes") != problem.data.train.class_names) {
    problem_text = "its class names differ from the deck's data";
  } else {
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

std::vector<double> read_trained_theta(const std::string& path, const FederatedProblem& problem) {
  std::vector<double> theta(problem.model->parameters());
  collective_check([&] {
    if (world_rank() == 0) theta = read_on_root(path, problem);
  });
  MPI_Bcast(theta.data(), static_cast<int>(theta.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return theta;
}

}  // namespace fluence
