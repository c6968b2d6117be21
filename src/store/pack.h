// Packs: append-only files of records (repository/record.h) behind a 32-byte header naming the
// repository (docs/format.md). A pack is never modified once written: prune writes new packs
// and removes whole old ones. After a crash, bytes past the size the catalog recorded are
// ignored (and reclaimed by prune). Where packs are kept: pack_store.h. PackWriter: one writer
// thread. PackReader: thread-safe (positioned reads). Reading the records in a pack:
// repository/pack_record.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace wanbackup::pipeline {

inline constexpr size_t kPackHeaderSize = 32;

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
  // Starts making everything appended so far durable and returns at once where the store can
  // do that in the background (object storage: the upload runs on a thread of its own); Sync()
  // then waits for it and says how it went. Nothing is appended in between. Default: Sync().
  virtual Status SyncInBackground() { return Sync(); }
  // False while a SyncInBackground is still running (Sync() would wait for it); true otherwise.
  virtual bool SyncFinished() const { return true; }
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

// The header of a new pack of repository `repository_id` (32 hex digits); Internal when the id
// is malformed.
Status MakePackHeader(const std::string& repository_id, uint8_t (&header)[kPackHeaderSize]);

// Checks a pack's header against the repository id.
Status CheckPackHeader(const PackReader& pack, const std::string& repository_id,
                       const std::string& path);

// The same over a file descriptor (tests, fuzzers).
Status CheckPackHeader(int fd, const std::string& repository_id, const std::string& path);
// Reads `size` bytes at `offset` (Corruption when the file ends first).
Status ReadPackBytes(int fd, uint64_t offset, uint8_t* data, size_t size);

}  // namespace wanbackup::pipeline
