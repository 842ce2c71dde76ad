#include "fluence/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fluence {

std::string message_excerpt(std::string_view text, std::size_t limit) {
  std::size_t kept = std::min(text.size(), limit);
  // Back over UTF-8 continuation bytes (10xxxxxx), so that the cut leaves whole characters.
  if (kept < text.size())
    while (kept > 0 && (static_cast<unsigned char>(text[kept]) & 0xC0) == 0x80) --kept;
  std::string shown;
  shown.reserve(kept + 16);
  for (const char c : text.substr(0, kept)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f)
      shown += fmt::format("\\x{:02x}", byte);
    else
      shown += c;
  }
  if (kept < text.size()) shown += fmt::format("... ({} bytes)", text.size());
  return shown;
}

}  // namespace fluence
