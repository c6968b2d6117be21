#include "common/text.h"

#include <cstdint>

namespace wanbackup {

bool IsUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<uint8_t>(text[i]);
    size_t more = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // the range of the byte after the first
    if (b < 0x80) {
      ++i;
      continue;
    }
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
      return false;
    }
    if (text.size() - i <= more) return false;
    for (size_t k = 1; k <= more; ++k) {
      const auto c = static_cast<uint8_t>(text[i + k]);
      if (k == 1 ? (c < lo || c > hi) : (c & 0xC0) != 0x80) return false;
    }
    i += more + 1;
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

}  // namespace wanbackup
