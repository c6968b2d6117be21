// The catalog's chunk-map codec (catalog/map_codec.h): the first 4 bytes give the expected
// entry count; whatever decodes must encode and decode to the same ids.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "catalog/map_codec.h"

using namespace wanbackup::catalog;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const size_t count = (data[0] | data[1] << 8 | data[2] << 16 | size_t{data[3]} << 24) %
                       4096;  // small counts: the same paths, many more runs
  const std::string encoded(reinterpret_cast<const char*>(data + 4), size - 4);
  auto ids = DecodeChunkMap(encoded, count);
  if (!ids.ok()) return 0;
  auto again = DecodeChunkMap(EncodeChunkMap(*ids), count);
  if (!again.ok() || *again != *ids) std::abort();
  return 0;
}
