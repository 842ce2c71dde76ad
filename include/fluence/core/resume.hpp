#pragma once
// Resumable sweeps (docs/operations.md). A long computation (the what-if retrains, the FLDP cases,
// the client-influence solves and retrains) declares the state it needs to continue as named
// arrays and reports every finished unit of work; the command turns that into checkpoints, stops
// on a signal and restarts without redoing finished units. The computation itself knows nothing
// of files or signals: the command hands it a SweepCheckpoint.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace fluence {

/// Named numeric arrays: the state a command declares resumable (what a checkpoint stores).
using StateArrays = std::map<std::string, std::vector<double>>;

/// Present (= {1}) in a checkpoint written by a stop inside a unit of work: the sweep's arrays
/// then hold that unit's partial state too (docs/operations.md "Stops inside a unit"), and a
/// restart reads them even before the first unit finished.
inline constexpr const char* kPartialUnit = "sweep/partial";

class SweepCheckpoint {
 public:
  virtual ~SweepCheckpoint() = default;
  /// The state the interrupted run saved (empty: a fresh start).
  virtual const StateArrays& restored() const = 0;
  /// Collective, after finished units of work: `units` counts every finished unit, restored ones
  /// included. When a checkpoint is due (output.checkpoint_every) or a stop signal reached any
  /// rank, `save` is called on every rank to fill in the sweep's arrays. True: a stop signal
  /// arrived and the checkpoint is written; the sweep must return at once, marked stopped.
  virtual bool units_done(long units, const std::function<void(StateArrays&)>& save) = 0;
};

/// A unit of a sweep that a stop interrupted (docs/operations.md "Stops inside a unit"), kept for
/// the next checkpoint and read back on restart. Which unit it is, is the command's `key` (a
/// fixed number of values: its kind, ids, place in the sweep); `scalars` are what continues it
/// besides `state` (a solver's interrupted_state or a Newton iterate). A checkpoint holds them as
/// `<prefix>/partial` = [key..., scalars...] and `<prefix>/partial_state`, with kPartialUnit.
/// One class for every command, so that influence, fldp and whatif save and resume alike.
class PartialUnit {
 public:
  PartialUnit(std::string prefix, std::size_t key_size)
      : prefix_(std::move(prefix)), key_size_(key_size) {}
  /// Reads the unit `state` saved, if any (InputError when it does not fit the key).
  void restore(const StateArrays& state);
  /// The saved state when the saved unit is `key` (null otherwise); `scalars` (when given)
  /// receives its scalars. Given once: the unit continues from it and is forgotten here, so that
  /// later checkpoints do not carry it.
  const std::vector<double>* resume(const std::vector<double>& key, std::vector<double>* scalars);
  /// The key of the restored unit that waits for resume() (empty: none), for a sweep that skips
  /// the finished parts of that unit before it reaches it.
  const std::vector<double>& waiting() const { return key_; }
  /// Collective in spirit: every rank records the same interrupted unit, then the command writes
  /// its checkpoint. Logs "stop inside NAME: WHERE saved".
  void interrupted(std::vector<double> key, const std::vector<double>& scalars,
                   std::vector<double> state, const std::string& name, const std::string& where);
  /// Adds the interrupted unit, if any, to a checkpoint's arrays.
  void save(StateArrays& state) const;

 private:
  std::string prefix_;
  std::size_t key_size_;
  std::vector<double> key_, scalars_, state_, resumed_;
};

/// The array `name` of `state`; InputError naming it when it is missing (a checkpoint that does
/// not fit this run).
const std::vector<double>& state_array(const StateArrays& state, const std::string& name);
/// The same, checked to hold `size` values.
const std::vector<double>& state_array(const StateArrays& state, const std::string& name,
                                       std::size_t size);

/// Finished-unit flags as stored (1 = done); all false when `name` is absent.
std::vector<char> state_flags(const StateArrays& state, const std::string& name, std::size_t size);
std::vector<double> flags_array(const std::vector<char>& flags);

/// A record's scalars as a checkpoint stores them: one array, a value per named field in the
/// table's order (the order is the file format: a new field goes at the end, and a checkpoint
/// written before it is refused by the size check of `read`). Integers travel as doubles, exact
/// below 2^53.
template <class Record>
class ScalarFields {
 public:
  // std::int64_t is long or long long: both are here.
  using Member = std::variant<double Record::*, int Record::*, long Record::*, long long Record::*>;
  struct Field {
    const char* name;
    Member member;
  };
  ScalarFields(std::initializer_list<Field> fields) : fields_(fields) {}

  std::vector<double> pack(const Record& record) const {
    std::vector<double> values;
    values.reserve(fields_.size());
    for (const Field& field : fields_)
      values.push_back(std::visit([&](auto member) { return static_cast<double>(record.*member); },
                                  field.member));
    return values;
  }
  /// Sets `record`'s fields from the array `name` of `state` (InputError when it is missing or
  /// has another size).
  void read(const StateArrays& state, const std::string& name, Record& record) const {
    const std::vector<double>& values = state_array(state, name, fields_.size());
    for (std::size_t k = 0; k < fields_.size(); ++k)
      std::visit(
          [&](auto member) {
            using Value = std::remove_reference_t<decltype(record.*member)>;
            record.*member = static_cast<Value>(values[k]);
          },
          fields_[k].member);
  }

 private:
  std::vector<Field> fields_;
};

/// A record's vectors as a checkpoint stores them: each as the array `<prefix><name>`.
template <class Record>
class VectorFields {
 public:
  struct Field {
    const char* name;
    std::vector<double> Record::*member;
  };
  VectorFields(std::initializer_list<Field> fields) : fields_(fields) {}

  void write(const Record& record, const std::string& prefix, StateArrays& state) const {
    for (const Field& field : fields_) state[prefix + field.name] = record.*field.member;
  }
  void read(const StateArrays& state, const std::string& prefix, Record& record) const {
    for (const Field& field : fields_)
      record.*field.member = state_array(state, prefix + field.name);
  }

 private:
  std::vector<Field> fields_;
};

}  // namespace fluence
