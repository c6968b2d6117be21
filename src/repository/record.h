// Records: how one chunk is stored in a pack (docs/format.md, "Pack files"). A record is a
// 64-byte header — magic, flags, raw and stored sizes, the chunk's keyed digest, a CRC32C of the
// header — followed by the payload: the chunk, zstd-compressed when that saves at least 3 %,
// sealed with XChaCha20-Poly1305 (fresh random 24-byte nonce; the digest, raw size and flags as
// associated data). Because every header names its digest and sizes, a pack can be read without
// the catalog, and the catalog can be checked against the packs.
//
// RecordCodec holds zstd contexts (behind a pointer, so that no zstd type appears here): one
// codec per thread (it is not thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/result.h"
#include "repository/keys.h"

namespace wanbackup::pipeline {

inline constexpr size_t kRecordHeaderSize = 64;
inline constexpr uint8_t kRecordCompressed = 1;
inline constexpr uint8_t kRecordEncrypted = 2;

// What a record holds (header byte 6; format 1 wrote zero there, so old records are chunks).
// The kind is authenticated with the payload, so a chunk cannot pose as a snapshot record.
enum class RecordKind : uint8_t {
  kChunk = 0,       // a chunk of a source
  kMapSegment = 1,  // part of a snapshot's chunk map (snapshot_record.h)
  kSnapshot = 2,    // a snapshot's metadata and the list of its map segments
  kForget = 3,      // snapshots forgotten: their sealed records no longer count (format 3)
  kHead = 4,        // the current snapshot set, with a counter that only grows (head_record.h)
};
inline constexpr uint8_t kMaxRecordKind = 4;

struct RecordHeader {
  uint8_t flags = 0;
  RecordKind kind = RecordKind::kChunk;
  uint32_t raw_size = 0;
  uint32_t stored_size = 0;  // payload bytes after the header
  Digest digest{};
};

void WriteRecordHeader(const RecordHeader& header, uint8_t* out);
// Fails with Corruption when the magic or the header checksum is wrong.
Result<RecordHeader> ParseRecordHeader(const uint8_t* in);

uint32_t Crc32c(const uint8_t* data, size_t size, uint32_t crc = 0);

class RecordCodec {
 public:
  RecordCodec(const KeySet& keys, int zstd_level);
  ~RecordCodec();
  RecordCodec(const RecordCodec&) = delete;
  RecordCodec& operator=(const RecordCodec&) = delete;

  // Compresses `data` into the codec's scratch space; returns the bytes to seal (compressed or,
  // when that does not help, `data` itself) and sets *flags.
  const uint8_t* Compress(const uint8_t* data, size_t size, size_t* out_size, uint8_t* flags);
  // Appends header + sealed payload to `out`.
  void Seal(const uint8_t* payload, size_t payload_size, uint8_t flags, uint32_t raw_size,
            const Digest& digest, std::vector<uint8_t>* out, RecordKind kind = RecordKind::kChunk);
  // Compresses, seals and appends a whole record of `data` (digest computed here) to `out`.
  Digest SealWhole(const uint8_t* data, size_t size, RecordKind kind, std::vector<uint8_t>* out);
  // Opens a record's payload into `out` (header.raw_size bytes) and checks the digest.
  // Corruption names what failed (authentication, decompression, digest).
  Status Open(const RecordHeader& header, const uint8_t* payload, uint8_t* out);

 private:
  const KeySet keys_;
  const int level_;
  struct ZstdContexts;  // record.cpp
  std::unique_ptr<ZstdContexts> zstd_;
  std::vector<uint8_t> scratch_;
};

}  // namespace wanbackup::pipeline
