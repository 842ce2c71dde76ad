#pragma once
namespace fluence {
const char* version();
const char* git_revision();
}  // namespace fluence
