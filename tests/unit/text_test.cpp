// common/text.h: the UTF-8 check that guards what snapshot records (JSON) hold, and the column
// padding of text tables.
#include "common/text.h"

#include <cstdint>
#include <optional>

#include <catch2/catch.hpp>

using wanbackup::CodePoints;
using wanbackup::EscapeForTerminal;
using wanbackup::IsUtf8;
using wanbackup::PadRight;

TEST_CASE("text: well-formed UTF-8 is accepted, anything else refused", "[unit]") {
  CHECK(IsUtf8(""));
  CHECK(IsUtf8("/dev/disk/by-id/wwn-0x5000c500a1b2c3d4"));
  CHECK(
      IsUtf8("n\xC3\xA4"
             "chtlich"));                   // ä
  CHECK(IsUtf8("\xE2\x82\xAC"));            // €
  CHECK(IsUtf8("\xF0\x9F\x92\xBE"));        // U+1F4BE
  CHECK(IsUtf8("\xF4\x8F\xBF\xBF"));        // U+10FFFF
  CHECK_FALSE(IsUtf8("b\xFE.img"));         // never a UTF-8 byte
  CHECK_FALSE(IsUtf8("x\xC3"));             // cut short
  CHECK_FALSE(IsUtf8("\xC0\xAF"));          // overlong '/'
  CHECK_FALSE(IsUtf8("\xE0\x80\xAF"));      // overlong, 3 bytes
  CHECK_FALSE(IsUtf8("\xED\xA0\x80"));      // a surrogate
  CHECK_FALSE(IsUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  CHECK_FALSE(IsUtf8("\xE2\x28\xA1"));      // a continuation byte missing
  CHECK_FALSE(IsUtf8("\x80"));              // a lone continuation byte
}

TEST_CASE("text: columns are padded by characters, not bytes", "[unit]") {
  CHECK(CodePoints("nightly") == 7);
  CHECK(CodePoints("n\xC3\xA4"
                   "chtlich") == 9);
  CHECK(PadRight("n\xC3\xA4"
                 "chtlich",
                 10) ==
        "n\xC3\xA4"
        "chtlich ");
  CHECK(PadRight("TAG", 5) == "TAG  ");
  CHECK(PadRight("longer", 3) == "longer");
}

TEST_CASE("text: a counter is decimal digits within 64 bits, nothing else", "[unit]") {
  using wanbackup::ParseDecimalU64;
  CHECK(ParseDecimalU64("0") == std::optional<uint64_t>(0));
  CHECK(ParseDecimalU64("42") == std::optional<uint64_t>(42));
  CHECK(ParseDecimalU64("18446744073709551615") == std::optional<uint64_t>(UINT64_MAX));
  for (const char* bad :
       {"", "+1", "-1", " 1", "1 ", "0x1", "1e3", "18446744073709551616", "99999999999999999999"}) {
    INFO(bad);
    CHECK_FALSE(ParseDecimalU64(bad).has_value());
  }
}

TEST_CASE("text: a terminal is shown controls, stray bytes and bidi overrides escaped", "[unit]") {
  CHECK(EscapeForTerminal("plain n\xC3\xA4me") == "plain n\xC3\xA4me");
  CHECK(EscapeForTerminal("a\nb\tc\x1b[0m\x7f") == "a\\x0ab\\x09c\\x1b[0m\\x7f");
  CHECK(EscapeForTerminal("x\xFFy\xC3") == "x\\xffy\\xc3");  // not UTF-8, and a cut sequence
  CHECK(EscapeForTerminal("\xC2\x85 \xE2\x80\xAE \xE2\x81\xA6 \xE2\x80\xA8") ==
        "\\u0085 \\u202e \\u2066 \\u2028");
  CHECK(EscapeForTerminal("\xE2\x82\xAC \xF0\x9F\x98\x80") == "\xE2\x82\xAC \xF0\x9F\x98\x80");
}

TEST_CASE("text: characters that show as nothing, and white space at either end, are found",
          "[unit]") {
  using wanbackup::FirstInvisibleCharacter;
  using wanbackup::HasEdgeSpace;
  CHECK_FALSE(FirstInvisibleCharacter("n\xC3\xA4"
                                      "chtlich \xE2\x82\xAC \xF0\x9F\x98\x80")
                  .has_value());
  CHECK(FirstInvisibleCharacter("late\xE2\x80\x8Bst") == std::optional<uint32_t>(0x200B));
  CHECK(FirstInvisibleCharacter("\xEF\xBB\xBFlatest") == std::optional<uint32_t>(0xFEFF));
  CHECK(FirstInvisibleCharacter("soft\xC2\xADhyphen") == std::optional<uint32_t>(0xAD));
  CHECK(FirstInvisibleCharacter("x\xE2\x81\xA0y") == std::optional<uint32_t>(0x2060));
  CHECK(FirstInvisibleCharacter("tag\xF3\xA0\x80\x81") == std::optional<uint32_t>(0xE0001));
  CHECK(FirstInvisibleCharacter("latest\xE2\xA0\x80") == std::optional<uint32_t>(0x2800));
  CHECK(FirstInvisibleCharacter("a\xEF\xBF\xB9") == std::optional<uint32_t>(0xFFF9));
  CHECK(FirstInvisibleCharacter("a\xF0\x93\x90\xB0") == std::optional<uint32_t>(0x13430));
  CHECK(FirstInvisibleCharacter("a\xEF\xBF\xBF") == std::optional<uint32_t>(0xFFFF));
  CHECK(FirstInvisibleCharacter("a\xEF\xB7\x90") == std::optional<uint32_t>(0xFDD0));
  CHECK(FirstInvisibleCharacter("a\xEE\x80\x80") == std::optional<uint32_t>(0xE000));
  CHECK(FirstInvisibleCharacter("\xE2\x80\xAE"
                                "evil") == std::optional<uint32_t>(0x202E));
  CHECK(HasEdgeSpace("latest "));
  CHECK(HasEdgeSpace(" latest"));
  CHECK(HasEdgeSpace(" "));
  CHECK(HasEdgeSpace("latest\xC2\xA0"));      // U+00A0
  CHECK(HasEdgeSpace("\xE3\x80\x80latest"));  // U+3000
  CHECK_FALSE(HasEdgeSpace("nightly run"));
  CHECK_FALSE(HasEdgeSpace(""));
  CHECK_FALSE(HasEdgeSpace("n\xC3\xA4"));
}
