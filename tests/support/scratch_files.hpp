#pragma once
// For tests that read files: a scratch directory per test (named after the process and the test,
// so that parallel runs of the suite cannot collide) and the check that a call fails with an
// InputError whose message holds given fragments.
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fluence/core/error.hpp"

namespace fluence::testing {

class ScratchDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ = std::filesystem::temp_directory_path() /
                 fmt::format("fluence_{}_{}_{}", ::getpid(), test->test_suite_name(), test->name());
    std::filesystem::remove_all(directory_);
    std::filesystem::create_directories(directory_);
  }

  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }

  std::string path(const std::string& name) const { return (directory_ / name).string(); }

  // Writes `content` to `name` (its directories made as needed) and returns the path.
  std::string write(const std::string& name, const std::string& content) const {
    std::filesystem::create_directories(std::filesystem::path(path(name)).parent_path());
    std::ofstream(path(name), std::ios::binary) << content;
    return path(name);
  }

  std::filesystem::path directory_;
};

// Runs `call` and checks that it throws an InputError whose message contains every fragment.
template <class Call>
void expect_input_error(Call&& call, const std::vector<std::string>& fragments) {
  try {
    call();
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& error) {
    const std::string message = error.what();
    for (const auto& fragment : fragments)
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "message \"" << message << "\" lacks \"" << fragment << "\"";
  }
}

}  // namespace fluence::testing
