#include "common/text.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

namespace wanbackup {

namespace {

// The length of the well-formed UTF-8 sequence at text[i] (1 to 4), or 0 when none starts there
// (no overlong forms, no surrogates, nothing above U+10FFFF).
size_t SequenceAt(std::string_view text, size_t i) {
  const auto b = static_cast<uint8_t>(text[i]);
  size_t more = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the range of the byte after the first
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) {
    more = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    more = 2;
    if (b == 0xE0) lo = 0xA0;  // overlong
    if (b == 0xED) hi = 0x9F;  // surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    more = 3;
    if (b == 0xF0) lo = 0x90;  // overlong
    if (b == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (text.size() - i <= more) return 0;
  for (size_t k = 1; k <= more; ++k) {
    const auto c = static_cast<uint8_t>(text[i + k]);
    if (k == 1 ? (c < lo || c > hi) : (c & 0xC0) != 0x80) return 0;
  }
  return more + 1;
}

// The code point of the well-formed sequence of `length` bytes at text[i].
uint32_t CodePointAt(std::string_view text, size_t i, size_t length) {
  static constexpr uint8_t kLeadMask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  uint32_t cp = static_cast<uint8_t>(text[i]) & kLeadMask[length];
  for (size_t k = 1; k < length; ++k)
    cp = (cp << 6) | (static_cast<uint8_t>(text[i + k]) & 0x3F);
  return cp;
}

// Characters a terminal acts on rather than shows: C1 controls, bidirectional overrides and
// isolates, the line and paragraph separators.
bool ActsOnTerminal(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

// Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt), the C1 controls, the
// blank Braille pattern (round 10, AA4), the other format characters (Cf), noncharacters and
// private-use characters, which show as nothing or as nothing standard (round 11, AB5).
bool IsInvisible(uint32_t cp) {
  return ActsOnTerminal(cp) || cp == 0x00AD || cp == 0x034F || cp == 0x061C || cp == 0x115F ||
         cp == 0x1160 || cp == 0x17B4 || cp == 0x17B5 || (cp >= 0x180B && cp <= 0x180F) ||
         cp == 0x2800 ||  // BRAILLE PATTERN BLANK: not ignorable, but shows as a blank
         (cp >= 0x0600 && cp <= 0x0605) || cp == 0x06DD || cp == 0x070F || cp == 0x0890 ||
         cp == 0x0891 || cp == 0x08E2 || cp == 0x110BD || cp == 0x110CD ||  // format (Cf)
         (cp >= 0xFFF9 && cp <= 0xFFFB) || (cp >= 0x13430 && cp <= 0x1343F) ||
         (cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE ||  // noncharacters
         (cp >= 0xE000 && cp <= 0xF8FF) || cp >= 0xF0000 ||            // private use
         (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2060 && cp <= 0x206F) || cp == 0x3164 || (cp >= 0xFE00 && cp <= 0xFE0F) ||
         cp == 0xFEFF || cp == 0xFFA0 || (cp >= 0xFFF0 && cp <= 0xFFF8) ||
         (cp >= 0x1BCA0 && cp <= 0x1BCA3) || (cp >= 0x1D173 && cp <= 0x1D17A) ||
         (cp >= 0xE0000 && cp <= 0xE0FFF);
}

// White space (Unicode's White_Space property).
bool IsSpace(uint32_t cp) {
  return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

}  // namespace

std::optional<uint32_t> FirstInvisibleCharacter(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t length = SequenceAt(text, i);
    if (length == 0) return std::nullopt;  // not UTF-8: the caller's check says so
    const uint32_t cp = CodePointAt(text, i, length);
    if (IsInvisible(cp)) return cp;
    i += length;
  }
  return std::nullopt;
}

bool HasEdgeSpace(std::string_view text) {
  if (text.empty() || SequenceAt(text, 0) == 0) return false;
  if (IsSpace(CodePointAt(text, 0, SequenceAt(text, 0)))) return true;
  size_t last = text.size() - 1;  // back to the last character's first byte
  while (last > 0 && (static_cast<uint8_t>(text[last]) & 0xC0) == 0x80)
    --last;
  const size_t length = SequenceAt(text, last);
  return length != 0 && IsSpace(CodePointAt(text, last, length));
}

std::string ShellWord(const std::string& word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
  });
  if (plain) return word;
  std::string out = "'";
  for (const char c : word)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool IsUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t length = SequenceAt(text, i);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

size_t CodePoints(std::string_view text) {
  size_t n = 0;
  for (const char c : text) {
    if ((static_cast<uint8_t>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::string PadRight(std::string_view text, size_t columns) {
  std::string out(text);
  const size_t have = CodePoints(text);
  if (have < columns) out.append(columns - have, ' ');
  return out;
}

std::optional<uint64_t> ParseDecimalU64(std::string_view text) {
  if (text.empty()) return std::nullopt;
  uint64_t n = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<uint64_t>(c - '0');
    if (n > (UINT64_MAX - digit) / 10) return std::nullopt;
    n = n * 10 + digit;
  }
  return n;
}

std::string EscapeControl(const std::string& value) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeForTerminal(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<uint8_t>(text[i]);
    const size_t length = SequenceAt(text, i);
    if (length == 0 || b < 0x20 || b == 0x7f) {  // a control character, or a stray byte
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 0xf];
      ++i;
      continue;
    }
    if (const uint32_t cp = CodePointAt(text, i, length); length > 1 && ActsOnTerminal(cp)) {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4)
        out += kHex[(cp >> shift) & 0xf];
    } else {
      out.append(text.substr(i, length));
    }
    i += length;
  }
  return out;
}

}  // namespace wanbackup
