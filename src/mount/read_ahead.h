// Sequential read-ahead for one open disk.img: which chunks to start fetching before a read asks
// for them, so that several fetches are in flight while a reader streams through the image (the
// same latency hiding as the initiator's READs in flight, for a repository on slow or remote
// storage). A read that starts where the previous one ended continues a sequential run; once
// the run reaches `trigger_bytes`, each read asks for the chunks after the one it ends in, a
// window of `initial_window` chunks that doubles each time the reader enters a new chunk, up to
// `max_window`. A read anywhere else ends the run and asks for nothing, so random reads (a
// file system's metadata, one small file) fetch only what they touch. Each chunk is asked for
// once per run. Pure logic; not thread-safe (one per open file, used by the FUSE thread).
#pragma once

#include <cstdint>
#include <vector>

namespace wanbackup::mount {

struct ReadAheadOptions {
  uint64_t trigger_bytes = 1u << 20;
  uint32_t initial_window = 2;
  uint32_t max_window = 8;
};

// `options` with a window that fits in half of a cache of `cache_bytes` (at least one chunk):
// chunks fetched ahead must still be cached when the reader reaches them, so a large chunk
// size or a small cache means a smaller window, not chunks fetched twice.
ReadAheadOptions FitToCache(ReadAheadOptions options, uint64_t cache_bytes, uint32_t chunk_size);

class ReadAhead {
 public:
  ReadAhead(uint64_t image_size, uint32_t chunk_size, const ReadAheadOptions& options);

  // A read of `size` bytes at `offset`: the chunk indexes to fetch ahead of it now, in order.
  std::vector<uint64_t> OnRead(uint64_t offset, uint64_t size);

  uint32_t window() const { return window_; }

 private:
  const uint64_t chunk_count_;
  const uint32_t chunk_size_;
  const ReadAheadOptions options_;
  uint64_t end_ = UINT64_MAX;  // where the last read ended (none yet: no run)
  uint64_t run_bytes_ = 0;
  uint64_t last_chunk_ = 0;   // the chunk the last read ended in
  uint64_t asked_until_ = 0;  // chunks below this were asked for in this run
  uint32_t window_ = 0;
};

}  // namespace wanbackup::mount
