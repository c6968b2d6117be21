// Sealed snapshot records: what a snapshot is, stored in the packs under the same AEAD as the
// data, so the catalog can be checked against it and rebuilt from the packs alone
// (docs/format.md, "Snapshot records").
//
// A snapshot's chunk map is cut into map segments of kSealedSegmentChunks entries, each a
// record of its own (RecordKind::kMapSegment) holding one digest per chunk (all-zero bytes for
// an all-zero chunk). Segments are content-addressed by their keyed digest, so a segment that
// did not change since the last snapshot is stored once. The snapshot record
// (RecordKind::kSnapshot) holds the snapshot's metadata and the digests of its segments in
// order. Pure functions over bytes; thread-safe. The parsers take untrusted bytes (fuzzed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "common/result.h"
#include "repository/keys.h"

namespace wanbackup::pipeline {

// Chunks per sealed map segment: 8192 digests = 256 KiB, 32 GiB of source at 4 MiB chunks.
inline constexpr uint64_t kSealedSegmentChunks = 8192;
// The digest a map segment stores for an all-zero chunk.
inline constexpr Digest kZeroChunkDigest{};
// Upper bound of a snapshot record's plaintext: 64 Mi chunks (256 TiB at 4 MiB) need 8192
// segment digests, about 540 KiB of JSON; anything far larger is not ours.
inline constexpr size_t kMaxSnapshotRecordSize = 16u << 20;
inline constexpr size_t kMapSegmentHeaderSize = 16;
inline constexpr size_t kMaxMapSegmentSize =
    kMapSegmentHeaderSize + kSealedSegmentChunks * sizeof(Digest);

// Layout: "WBMS", version 1, 3 zero bytes, entry count (u32 LE), 4 zero bytes, then the
// digests.
std::string EncodeMapSegment(const std::vector<Digest>& digests);
Result<std::vector<Digest>> DecodeMapSegment(const uint8_t* data, size_t size);

struct SnapshotRecord {
  std::string repository_id;
  catalog::SnapshotInfo info;    // id, source, tag, host, job, sizes, times, counters
  std::vector<Digest> segments;  // map segment digests, in index order
};

// JSON (a versioned object); the snapshot's status is implied: only complete snapshots have
// a record. InvalidArgument when the source, tag or host name is not UTF-8.
Result<std::string> EncodeSnapshotRecord(const SnapshotRecord& record);
// Checks shape and consistency (segment count matches the size and chunk size).
Result<SnapshotRecord> DecodeSnapshotRecord(const uint8_t* data, size_t size);

// A forget record (RecordKind::kForget): the snapshots `wanbackup forget` removed, each named by
// its id and the digest of its sealed snapshot record, so that a catalog rebuild leaves them out
// even while their records still sit in packs that prune has not rewritten yet. JSON:
// {"version": 1, "repository_id", "forgotten_unix_ms", "snapshots": [{"id", "record"}]}.
struct ForgottenSnapshot {
  int64_t id = 0;
  Digest record{};  // digest of the snapshot's sealed record
};
struct ForgetRecord {
  std::string repository_id;
  int64_t forgotten_unix_ms = 0;
  std::vector<ForgottenSnapshot> snapshots;
};
inline constexpr size_t kMaxForgetRecordSize = 16u << 20;
std::string EncodeForgetRecord(const ForgetRecord& record);
Result<ForgetRecord> DecodeForgetRecord(const uint8_t* data, size_t size);

// How many sealed segments a snapshot of `size_bytes` at `chunk_size` has.
uint64_t SealedSegmentCount(uint64_t size_bytes, uint32_t chunk_size);

}  // namespace wanbackup::pipeline
