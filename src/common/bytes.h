// Small byte-level helpers: little-endian integers in record and segment headers, and ownership
// of malloc'ed (aligned) buffers. Header-only, stateless.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

namespace wanbackup {

inline void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t GetU32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// Frees what posix_memalign/aligned_alloc returned.
struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using MallocBuffer = std::unique_ptr<uint8_t, FreeDeleter>;

}  // namespace wanbackup
