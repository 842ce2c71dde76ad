#pragma once
// The data sources (data.source in the deck), one DataSourceSpec each in a table
// (core/registry.hpp, docs/extending.md "A data source"): load_data, load_data_index, hold_rows,
// DataConfig::from_deck's checks and the data.source key's choices all read the table, so a new
// source is its reader, one register_data_source() call and its test. The built-ins are written by
// their readers' files (csv, arff and idx in loaders.cpp, hdf5 and tff in hdf5_source.cpp, npy in
// npy_source.cpp, leaf in leaf_source.cpp, synthetic in source.cpp) and listed in a fixed order in
// source.cpp.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fluence/data/source.hpp"

namespace fluence {

/// What a source reads with: the deck's [data] settings, the run seed (synthetic data) and the
/// categorical attribute whose values become the clients (partition.scheme = "column"; empty:
/// none). A source may give that attribute as Table::client itself (csv and arff in the index pass)
/// or leave it among the attributes, from where load_data moves it.
using ReadSource = std::function<TrainTest(const DataConfig& config, std::uint64_t seed,
                                           const std::string& client_column)>;

/// Reading a rank's rows only (distributed ownership, data/source.hpp load_data_index and
/// hold_rows); a source without it is read whole on every rank, which then drops the rows it does
/// not hold.
struct SelectiveReading {
  /// The first pass: partial tables (Table::partial) holding the schema, every row's label and
  /// client id and no values; Table::source_row where a row's place in the source is not its
  /// index (csv and arff: its line).
  ReadSource index{};
  /// The second pass: the source rows `request` asks for (ascending; Table::source_row's values),
  /// with the attributes `schema` has (the index pass's table after load_data's changes: the
  /// attributes data.features and data.drop keep, the client column moved out), as partial tables
  /// (Table::held: the source rows).
  std::function<TrainTest(const DataConfig& config, std::uint64_t seed, const Table& schema,
                          const RowRequest& request)>
      rows{};
  /// Whether the index pass can give partition.scheme = "column"'s attribute as the clients (it
  /// then holds no values to move the column out of); without, that scheme reads whole.
  bool with_client_column = false;
};

// Every member has an initializer, so that a spec written with designated initializers may leave
// any out (-Wmissing-field-initializers).
struct DataSourceSpec {
  std::string name{};  // data.source
  /// The source-specific [data] keys it reads (data.delimiter, data.arrays.*, ...): a deck that
  /// gives one with a source that does not read it is refused, naming the sources that do (those
  /// with the most source-specific keys first).
  std::vector<std::string> keys{};
  /// Needs data.path (every built-in but synthetic).
  bool reads_path = true;
  /// Its rows are images whose mean intensity data.ink_levels may turn into an attribute (idx).
  bool ink_levels = false;
  /// Applies data.features and data.drop while reading (csv: a dropped column is never parsed);
  /// the others' attributes are chosen after reading.
  bool selects_attributes = false;
  /// Whether the test rows come from a file rather than from data.test_fraction's split; null: when
  /// data.test_path or data.arrays.test_features is given.
  std::function<bool(const DataConfig&)> has_test_file{};
  /// The class count known from the deck alone (synthetic data), so that `fluence validate`
  /// checks data.classes' range before loading; null: known only after reading.
  std::function<std::optional<int>(const DataConfig&)> classes_before_reading{};
  /// The source's own checks of the deck, after the common ones (InputError naming the key).
  std::function<void(const Deck&, const DataConfig&)> check{};
  /// Reads every row: the training table, and the test table from a test file (without one,
  /// empty with the schema until load_data splits the training rows).
  ReadSource read{};
  /// Null members: read whole on every rank.
  SelectiveReading selective{};
};

/// Selective reading for a reader that takes a RowRequest (hdf5, tff, npy, synthetic): the index
/// pass asks for no row, the second pass for the request's and keeps the schema's attributes.
SelectiveReading rows_by_request(
    std::function<TrainTest(const DataConfig& config, std::uint64_t seed, const RowRequest& rows)>
        read);

/// A source of arrays (array_sources.hpp's readers: data.path, data.test_path and data.arrays)
/// whose reader takes a RowRequest, read whole or selectively (rows_by_request); `keys` as
/// DataSourceSpec::keys.
DataSourceSpec array_source(std::string name, std::vector<std::string> keys,
                            TrainTest (*read)(const std::string& path, const std::string& test_path,
                                              const ArrayNames& names, const RowRequest* rows));

/// Adds a source (a later spec of the same name replaces the earlier one); before the deck schema
/// is first used (data.source's choices are the registered names).
void register_data_source(DataSourceSpec spec);
/// The sources in data.source's order: synthetic, csv, arff, idx, hdf5, tff, leaf, npy, then those
/// registered later.
std::vector<DataSourceSpec> registered_data_sources();
std::vector<std::string> data_source_names();
/// The spec of `name` (InputError naming data.source and the registered sources when there is
/// none).
DataSourceSpec data_source(const std::string& name);

}  // namespace fluence
