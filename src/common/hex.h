// Hexadecimal text of bytes (repository ids, wrapped keys, digests in records and messages).
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace wanbackup {

// Lower-case hex digits, two per byte.
std::string ToHex(const uint8_t* data, size_t size);
// True when `hex` is exactly 2 × `size` hex digits; their bytes in `out`.
bool FromHex(std::string_view hex, uint8_t* out, size_t size);

}  // namespace wanbackup
