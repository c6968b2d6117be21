// Reads byte ranges of the snapshots' disk images for the mount: finds the chunks a read
// touches, serves all-zero chunks without any I/O, takes the others from the cache or has the
// fetcher threads fetch them (and the read-ahead's chunks after them), waits, and copies.
// A chunk that cannot be read (damaged, missing) fails the whole read with Corruption naming
// the snapshot and the LBA range, and the read returns no bytes: never wrong ones.
// Not thread-safe: called on one thread, the one that owns the repository's catalog (the FUSE
// loop runs single-threaded; the parallelism is in the fetcher's threads).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "mount/chunk_cache.h"
#include "mount/chunk_fetcher.h"
#include "mount/read_ahead.h"
#include "mount/snapshot_image.h"
#include "mount/snapshot_tree.h"
#include "repository/repository.h"

namespace wanbackup::mount {

struct ReaderOptions {
  uint64_t cache_bytes = 256u << 20;
  int fetch_threads = 4;
  ReadAheadOptions read_ahead;
  // Called with one line for each read that failed (on the reading thread).
  std::function<void(const std::string&)> log;
};

struct ReaderStats {
  uint64_t stored_bytes_read = 0;  // record bytes read from the packs
  uint64_t chunks_fetched = 0;
  uint64_t zero_chunk_reads = 0;
  uint64_t failed_reads = 0;
  ChunkCache::Stats cache;
};

class ImageReader {
 public:
  ImageReader(pipeline::Repository& repo, const SnapshotTree& tree, const ReaderOptions& options);

  // A read-ahead state for one open of snapshot `snapshot`'s disk.img.
  std::unique_ptr<ReadAhead> NewReadAhead(size_t snapshot) const;
  // Reads up to `size` bytes at `offset` of snapshot `snapshot`'s image into `out`; returns the
  // bytes read (fewer only at the image's end).
  Result<size_t> Read(size_t snapshot, ReadAhead* ahead, uint64_t offset, size_t size,
                      uint8_t* out);
  ReaderStats stats() const;

 private:
  Result<SnapshotImage*> Image(size_t snapshot);
  Status ReadChunks(SnapshotImage& image, uint64_t offset, size_t size, uint8_t* out);
  void StartAhead(SnapshotImage& image, const std::vector<uint64_t>& chunks);
  std::string RangeText(const catalog::SnapshotInfo& s, uint64_t offset, uint64_t length) const;

  pipeline::Repository& repo_;
  const SnapshotTree& tree_;
  const ReaderOptions options_;
  ChunkCache cache_;
  std::vector<std::unique_ptr<SnapshotImage>> images_;  // opened on first read
  uint64_t zero_chunk_reads_ = 0, failed_reads_ = 0;
  ChunkFetcher fetcher_;  // last: its threads stop before the cache goes
};

}  // namespace wanbackup::mount
