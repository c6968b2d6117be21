// Sealed snapshot records and map segments (repository/snapshot_record.h). A record that decodes
// must encode and decode to the same thing.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "repository/snapshot_record.h"

using namespace wanbackup::pipeline;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)DecodeMapSegment(data, size);
  auto record = DecodeSnapshotRecord(data, size);
  if (!record.ok()) return 0;
  auto encoded = EncodeSnapshotRecord(*record);  // what decoded is UTF-8: it must encode
  if (!encoded.ok()) std::abort();
  const std::string& again = *encoded;
  auto decoded = DecodeSnapshotRecord(reinterpret_cast<const uint8_t*>(again.data()), again.size());
  if (!decoded.ok() || decoded->segments != record->segments ||
      decoded->info.size_bytes != record->info.size_bytes ||
      decoded->info.source != record->info.source) {
    std::abort();
  }
  return 0;
}
