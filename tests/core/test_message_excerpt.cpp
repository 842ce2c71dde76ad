// message_excerpt (core/error.hpp): what an error message shows of a user-supplied text.
#include <gtest/gtest.h>

#include <string>

#include "fluence/core/error.hpp"

namespace fluence {
namespace {

using namespace std::string_literals;

TEST(MessageExcerpt, ShortPrintableTextIsShownAsItIs) {
  EXPECT_EQ(message_excerpt("abc, d'e"), "abc, d'e");
  EXPECT_EQ(message_excerpt(""), "");
  EXPECT_EQ(message_excerpt(std::string(60, 'x')), std::string(60, 'x'));
}

TEST(MessageExcerpt, ControlBytesAndNulAreEscaped) {
  EXPECT_EQ(message_excerpt("a\0b"s), "a\\x00b");
  EXPECT_EQ(message_excerpt("line\nnext\t\x7f"), "line\\x0anext\\x09\\x7f");
  EXPECT_EQ(message_excerpt("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 passes through
}

TEST(MessageExcerpt, LongTextIsCutWithItsLength) {
  const std::string field(20'000'000, 'z');
  EXPECT_EQ(message_excerpt(field), std::string(60, 'z') + "... (20000000 bytes)");
  EXPECT_EQ(message_excerpt(std::string(61, 'y'), 60), std::string(60, 'y') + "... (61 bytes)");
  EXPECT_EQ(message_excerpt("abcdef", 3), "abc... (6 bytes)");
  // The escapes of the kept part are shown; the length counts the original bytes.
  EXPECT_EQ(message_excerpt("\0\0\0\0"s, 2), "\\x00\\x00... (4 bytes)");
}

TEST(MessageExcerpt, CutNeverSplitsAUtf8Character) {
  // "é" is two bytes: a cut after one of them backs off to before the character.
  EXPECT_EQ(message_excerpt("ab\xc3\xa9", 3), "ab... (4 bytes)");
  EXPECT_EQ(message_excerpt("ab\xe2\x82\xac!", 4), "ab... (6 bytes)");
  EXPECT_EQ(message_excerpt("ab\xe2\x82\xac!", 5), "ab\xe2\x82\xac... (6 bytes)");
}

}  // namespace
}  // namespace fluence
