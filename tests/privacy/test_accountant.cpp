// The accountant registry: the built-ins in their order, the RDP part bitwise the RDP accountant,
// a new accountant added by one registration, and the errors that name the allowed ones.
#include <gtest/gtest.h>

#include <string>

#include "fluence/core/error.hpp"
#include "fluence/privacy/accountant.hpp"
#include "fluence/privacy/rdp_accountant.hpp"

namespace fluence {
namespace {

TEST(AccountantRegistry, BuiltInsInTheirOrder) {
  const auto names = accountant_names();
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names[0], "rdp");
  EXPECT_EQ(names[1], "pld");
  EXPECT_EQ(names[2], "prv");
  for (const auto& spec : registered_accountants()) EXPECT_EQ(spec.create()->name(), spec.name);
}

// The "rdp" part is the RDP accountant behind the interface: the same bits, also after a restore
// (runs with the default accountant keep their results).
TEST(AccountantRegistry, RdpPartIsTheRdpAccountantBitwise) {
  auto part = make_accountant("rdp");
  part->add_steps(0.05, 1.1, 30);
  part->add_steps(0.02, 0.9, 7);
  RdpAccountant direct;
  direct.add_steps(0.05, 1.1, 30);
  direct.add_steps(0.02, 0.9, 7);
  const EpsilonReport report = part->epsilon(1e-6);
  const PrivacySpent spent = direct.spent(1e-6);
  EXPECT_EQ(report.epsilon, spent.epsilon);
  EXPECT_EQ(report.rdp_order, spent.order);
  auto restored = make_accountant("rdp");
  restored->restore(part->state());
  EXPECT_EQ(restored->epsilon(1e-6).epsilon, spent.epsilon);
  // The search for z through the registry is the RDP search bit for bit.
  EXPECT_EQ(accountant_noise_for_epsilon("rdp", 0.01, 1000, 2.0, 1e-5),
            noise_for_epsilon(0.01, 1000, 2.0, 1e-5));
}

// smallest_noise_multiplier on a closed form: eps(z) = 3 / z reaches eps 1.5 at z = 2.
TEST(AccountantRegistry, NoiseSearchFindsTheSmallestMultiplier) {
  const double z = smallest_noise_multiplier([](double s) { return 3.0 / s; }, 1.5, 1e-12, "test");
  EXPECT_NEAR(z, 2.0, 4e-12);
  EXPECT_LE(3.0 / z, 1.5);
  EXPECT_THROW(smallest_noise_multiplier([](double) { return 10.0; }, 1.0, 1e-10, "flat"),
               InputError);
}

// A new accountant is one class and one registration (docs/extending.md).
class CountingAccountant final : public Accountant {
 public:
  std::string_view name() const override { return "steps_test"; }
  // eps = sum of steps / z: decreasing in z, as a real accountant's.
  void add_steps(double, double noise, long steps) override {
    steps_ += static_cast<double>(steps) / noise;
  }
  EpsilonReport epsilon(double delta) const override {
    EpsilonReport report;
    report.epsilon = report.estimate = report.upper = steps_;
    report.delta = delta;
    return report;
  }
  std::vector<double> state() const override { return {steps_}; }
  void restore(const std::vector<double>& state) override { steps_ = state.at(0); }

 private:
  double steps_ = 0.0;
};

TEST(AccountantRegistry, TakesANewAccountantAndNamesTheAllowedOnes) {
  register_accountant({"steps_test", "eps = steps / z",
                       [] { return std::unique_ptr<Accountant>(new CountingAccountant()); }});
  EXPECT_EQ(accountant_epsilon("steps_test", 0.1, 2.0, 12, 1e-5).epsilon, 6.0);
  // 3 / z <= 5 from z = 0.6 on (bisection to 1e-10 relative).
  EXPECT_NEAR(accountant_noise_for_epsilon("steps_test", 0.1, 3, 5.0, 1e-5), 0.6, 1e-9);
  try {
    make_accountant("moments", "--accountant");
    FAIL() << "an unknown accountant was accepted";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("--accountant = \"moments\""), std::string::npos) << message;
    EXPECT_NE(message.find("\"pld\""), std::string::npos) << message;
    EXPECT_NE(message.find("\"steps_test\""), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace fluence
