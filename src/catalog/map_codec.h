// How a snapshot's chunk map is stored: for each chunk index, the id of its chunk (0 for an
// all-zero chunk). Ids of a first snapshot rise by one from chunk to chunk, and later snapshots
// repeat their parent's ids wherever nothing changed, so the map is stored as runs of equal
// deltas: (delta, run length) pairs as zigzag varints. A 16 TiB LUN (4 Mi chunks) takes a few
// bytes unchanged and about 8 bytes per changed chunk. Pure functions; thread-safe.
// Format: docs/format.md, "Chunk maps".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace wanbackup::catalog {

std::string EncodeChunkMap(const std::vector<int64_t>& ids);
// Fails (Corruption) on malformed input or when the entry count differs from `expected_count`.
Result<std::vector<int64_t>> DecodeChunkMap(const std::string& encoded, size_t expected_count);

}  // namespace wanbackup::catalog
