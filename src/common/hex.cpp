#include "common/hex.h"

#include <sodium.h>

namespace wanbackup {

std::string ToHex(const uint8_t* data, size_t size) {
  std::string out(size * 2 + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), data, size);
  out.resize(size * 2);
  return out;
}

bool FromHex(std::string_view hex, uint8_t* out, size_t size) {
  size_t bin_len = 0;
  return sodium_hex2bin(out, size, hex.data(), hex.size(), nullptr, &bin_len, nullptr) == 0 &&
         bin_len == size;
}

}  // namespace wanbackup
