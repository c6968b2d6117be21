// Pack files: append-only files of records (record.h) behind a 32-byte header naming the
// repository (docs/format.md). A pack is never rewritten; after a crash, bytes past the size the
// catalog recorded are ignored (and later reclaimed). PackWriter: one writer thread.
// ReadRecordAt: thread-safe (pread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "pipeline/record.h"

namespace wanbackup::pipeline {

inline constexpr size_t kPackHeaderSize = 32;
// Bounds for sizes read from the catalog or a pack before they size an allocation or a write:
// the largest chunk a repository may have, and the largest record payload (that chunk plus
// ample room for zstd's worst-case growth and the AEAD tag).
inline constexpr uint32_t kMaxChunkSize = 64u << 20;
inline constexpr uint32_t kMaxRecordPayload = kMaxChunkSize + (1u << 20);

class PackWriter {
 public:
  // Creates a new pack file (mode 0600) and writes its header.
  static Result<std::unique_ptr<PackWriter>> Create(const std::string& path,
                                                    const std::string& repository_id);
  ~PackWriter();
  PackWriter(const PackWriter&) = delete;
  PackWriter& operator=(const PackWriter&) = delete;

  // Appends whole records; returns the offset of the first byte written.
  Result<uint64_t> Append(const uint8_t* data, size_t size);
  // Makes everything appended so far durable (fdatasync).
  Status Sync();
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  PackWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
  uint64_t size_ = 0;
};

// Checks a pack file's header against the repository id.
Status CheckPackHeader(int fd, const std::string& repository_id, const std::string& path);

// Reads the record at `offset` of pack `fd` into `buffer` (header + payload): `stored_size` is
// what the catalog says; the header must agree. Returns the parsed header.
Result<RecordHeader> ReadRecordAt(int fd, uint64_t offset, uint32_t stored_size,
                                  std::vector<uint8_t>* buffer);
// Reads only the header of the record at `offset`; its stored size must be `stored_size`.
Result<RecordHeader> ReadRecordHeaderAt(int fd, uint64_t offset, uint32_t stored_size);
// Reads `size` bytes at `offset` (Corruption when the file ends first).
Status ReadPackBytes(int fd, uint64_t offset, uint8_t* data, size_t size);

}  // namespace wanbackup::pipeline
