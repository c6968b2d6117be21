#include "catalog/map_codec.h"

#include <algorithm>

namespace wanbackup::catalog {
namespace {

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

bool GetVarint(const std::string& in, size_t* pos, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= in.size()) return false;
    const auto byte = static_cast<uint8_t>(in[(*pos)++]);
    result |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}

uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t UnZigZag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

}  // namespace

std::string EncodeChunkMap(const std::vector<int64_t>& ids) {
  std::string out;
  int64_t previous = 0;
  size_t i = 0;
  while (i < ids.size()) {
    const int64_t delta = ids[i] - previous;
    size_t run = 1;
    int64_t last = ids[i];
    while (i + run < ids.size() && ids[i + run] - last == delta) {
      last = ids[i + run];
      ++run;
    }
    PutVarint(ZigZag(delta), &out);
    PutVarint(run, &out);
    previous = last;
    i += run;
  }
  return out;
}

Result<std::vector<int64_t>> DecodeChunkMap(const std::string& encoded, size_t expected_count) {
  std::vector<int64_t> ids;
  // The count comes from the catalog: a hint, never trusted to size memory by itself.
  ids.reserve(std::min<size_t>(expected_count, 65536));
  size_t pos = 0;
  int64_t value = 0;
  while (pos < encoded.size()) {
    uint64_t zz = 0, run = 0;
    if (!GetVarint(encoded, &pos, &zz) || !GetVarint(encoded, &pos, &run) || run == 0 ||
        run > expected_count - ids.size()) {
      return Status::Corruption("a snapshot's chunk map is malformed");
    }
    const int64_t delta = UnZigZag(zz);
    for (uint64_t k = 0; k < run; ++k) {
      if (__builtin_add_overflow(value, delta, &value) || value < 0) {
        return Status::Corruption("a snapshot's chunk map names an impossible chunk id");
      }
      ids.push_back(value);
    }
  }
  if (ids.size() != expected_count) {
    return Status::Corruption("a snapshot's chunk map holds " + std::to_string(ids.size()) +
                              " entries, expected " + std::to_string(expected_count));
  }
  return ids;
}

}  // namespace wanbackup::catalog
