// Reading one record out of a pack (record.h, store/pack.h): the bounds a record's sizes must keep
// before they size an allocation, and the reads that check a record's header against the size
// the catalog recorded. Thread-safe (positioned reads).
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "repository/record.h"
#include "store/pack.h"

namespace wanbackup::pipeline {

// Bounds for sizes read from the catalog or a pack before they size an allocation or a write:
// the largest chunk a repository may have, and the largest record payload (that chunk plus
// ample room for zstd's worst-case growth and the AEAD tag).
inline constexpr uint32_t kMaxChunkSize = 64u << 20;
inline constexpr uint32_t kMaxRecordPayload = kMaxChunkSize + (1u << 20);

// Reads the record at `offset` of `pack` into `buffer` (header + payload): `stored_size` is
// what the catalog says; the header must agree. Returns the parsed header.
Result<RecordHeader> ReadRecordAt(const PackReader& pack, uint64_t offset, uint32_t stored_size,
                                  std::vector<uint8_t>* buffer);
// Reads only the header of the record at `offset`; its stored size must be `stored_size`.
Result<RecordHeader> ReadRecordHeaderAt(const PackReader& pack, uint64_t offset,
                                        uint32_t stored_size);

// The same over a file descriptor (tests, fuzzers).
Result<RecordHeader> ReadRecordAt(int fd, uint64_t offset, uint32_t stored_size,
                                  std::vector<uint8_t>* buffer);
Result<RecordHeader> ReadRecordHeaderAt(int fd, uint64_t offset, uint32_t stored_size);

}  // namespace wanbackup::pipeline
