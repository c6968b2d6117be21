// The repository's head (RecordKind::kHead): the snapshot set as the last key holder who changed
// it left it, sealed in the packs under the same AEAD as everything (docs/format.md, "Head
// records"). Each head carries a counter that grows by one with every change of the set, so a
// client that remembers the highest counter it saw (trust_anchor.h) notices a repository or a
// catalog turned back to an older set. Pure functions over bytes; thread-safe. The parser takes
// untrusted bytes (fuzzed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "repository/keys.h"

namespace wanbackup::pipeline {

// One snapshot of the set: its id and the digest of its sealed snapshot record.
struct HeadEntry {
  int64_t id = 0;
  Digest record{};
  bool operator==(const HeadEntry& other) const = default;
};

// JSON: {"version": 1, "repository_id", "counter", "written_unix_ms",
//        "snapshots": [{"id", "record"}, ...]} with the snapshots in ascending id order.
struct HeadRecord {
  std::string repository_id;
  uint64_t counter = 0;  // >= 1; one more than the head it replaces
  int64_t written_unix_ms = 0;
  std::vector<HeadEntry> snapshots;  // ascending ids, each once
};

// About 100 bytes per snapshot: 16 MiB is room for more than 100,000 snapshots.
inline constexpr size_t kMaxHeadRecordSize = 16u << 20;

std::string EncodeHeadRecord(const HeadRecord& record);
// Checks shape: version, counter >= 1, ids positive and strictly ascending, digests of 32 bytes.
Result<HeadRecord> DecodeHeadRecord(const uint8_t* data, size_t size);

// What differs between a head's set and `set` (both in ascending id order), in one phrase
// ("snapshot 4 is missing from the catalog"), or empty when they are the same.
std::string DescribeSetDifference(const std::vector<HeadEntry>& head,
                                  const std::vector<HeadEntry>& set);

}  // namespace wanbackup::pipeline
