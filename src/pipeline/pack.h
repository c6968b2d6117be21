// Packs: append-only files of records (record.h) behind a 32-byte header naming the
// repository (docs/format.md). A pack is never modified once written: prune writes new packs
// and removes whole old ones. After a crash, bytes past the size the catalog recorded are
// ignored (and reclaimed by prune). Where packs are kept: pack_store.h. PackWriter: one writer
// thread. PackReader and ReadRecordAt: thread-safe (positioned reads).
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

// Appends records to a new pack. Implementations: a local file (below), later an object
// uploaded whole when sealed. One writer thread.
class PackWriter {
 public:
  // Creates a new local pack file (mode 0600, O_EXCL) and writes its header.
  static Result<std::unique_ptr<PackWriter>> Create(const std::string& path,
                                                    const std::string& repository_id);
  virtual ~PackWriter() = default;

  // Appends whole records; returns the offset of the first byte written.
  virtual Result<uint64_t> Append(const uint8_t* data, size_t size) = 0;
  // Makes everything appended so far durable (fdatasync).
  virtual Status Sync() = 0;
  virtual uint64_t size() const = 0;
  // Where the pack is, for messages.
  virtual const std::string& path() const = 0;
};

// Reads byte ranges of a pack. Thread-safe (positioned reads).
class PackReader {
 public:
  virtual ~PackReader() = default;
  // Reads `size` bytes at `offset` (Corruption when the pack ends first).
  virtual Status ReadAt(uint64_t offset, uint8_t* data, size_t size) const = 0;
  virtual Result<uint64_t> Size() const = 0;
};

// A PackReader over an open file descriptor it does not own.
class FdPackReader final : public PackReader {
 public:
  explicit FdPackReader(int fd) : fd_(fd) {}
  Status ReadAt(uint64_t offset, uint8_t* data, size_t size) const override;
  Result<uint64_t> Size() const override;

 private:
  int fd_;
};

// Checks a pack's header against the repository id.
Status CheckPackHeader(const PackReader& pack, const std::string& repository_id,
                       const std::string& path);

// Reads the record at `offset` of `pack` into `buffer` (header + payload): `stored_size` is
// what the catalog says; the header must agree. Returns the parsed header.
Result<RecordHeader> ReadRecordAt(const PackReader& pack, uint64_t offset, uint32_t stored_size,
                                  std::vector<uint8_t>* buffer);
// Reads only the header of the record at `offset`; its stored size must be `stored_size`.
Result<RecordHeader> ReadRecordHeaderAt(const PackReader& pack, uint64_t offset,
                                        uint32_t stored_size);

// The same over a file descriptor (tests, fuzzers).
Status CheckPackHeader(int fd, const std::string& repository_id, const std::string& path);
Result<RecordHeader> ReadRecordAt(int fd, uint64_t offset, uint32_t stored_size,
                                  std::vector<uint8_t>* buffer);
Result<RecordHeader> ReadRecordHeaderAt(int fd, uint64_t offset, uint32_t stored_size);
// Reads `size` bytes at `offset` (Corruption when the file ends first).
Status ReadPackBytes(int fd, uint64_t offset, uint8_t* data, size_t size);

}  // namespace wanbackup::pipeline
