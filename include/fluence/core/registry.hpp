#pragma once
// A table of named specs (PETSc's XRegister pattern, docs/architecture.md "Extension points"):
// accountants, server optimizers and the other parts chosen by a deck key are looked up by name
// here instead of by string if-chains, so a new one is one class and one add() call. Spec is a
// struct with a `std::string name` member.
#include <fmt/format.h>

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "fluence/core/error.hpp"

namespace fluence {

template <class Spec>
class Registry {
 public:
  /// `kind` names an entry in errors ("an accountant"); the built-ins come first, in their order.
  Registry(std::string kind, std::vector<Spec> built_ins)
      : kind_(std::move(kind)), specs_(std::move(built_ins)) {}

  /// Adds a spec; a later spec of the same name replaces the earlier one (in its place).
  void add(Spec spec) {
    if (spec.name.empty()) throw InputError("registry: " + kind_ + " needs a name");
    std::lock_guard lock(mutex_);
    for (auto& existing : specs_)
      if (existing.name == spec.name) {
        existing = std::move(spec);
        return;
      }
    specs_.push_back(std::move(spec));
  }
  std::vector<Spec> specs() const {
    std::lock_guard lock(mutex_);
    return specs_;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> names;
    for (const Spec& spec : specs()) names.push_back(spec.name);
    return names;
  }
  /// The spec of that name; InputError naming `what` (the key or option), the value and the
  /// registered names when there is none.
  Spec find(std::string_view name, std::string_view what) const {
    for (const Spec& spec : specs())
      if (spec.name == name) return spec;
    throw InputError(fmt::format("{} = \"{}\" is not {}; allowed: \"{}\"", what, name, kind_,
                                 fmt::join(names(), "\", \"")));
  }

 private:
  std::string kind_;
  mutable std::mutex mutex_;
  std::vector<Spec> specs_;
};

}  // namespace fluence
