// Fetches chunks for the mount on a few threads of its own: each reads a chunk's record from
// its pack, authenticates, decompresses and checks it (LoadSealedChunk, as restore does) and
// fills the cache entry, or fails it with the reason. Reads that wait for a chunk go first
// (Urgent), read-ahead after (Ahead), so a reader jumping elsewhere is not kept waiting behind
// chunks it will not need soon. Counts the stored bytes it read from the packs.
// Thread-safe; the destructor stops the threads after the fetches under way.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "mount/chunk_cache.h"
#include "mount/snapshot_image.h"
#include "repository/repository.h"

namespace wanbackup::mount {

class ChunkFetcher {
 public:
  ChunkFetcher(pipeline::Repository& repo, ChunkCache& cache, int threads);
  ~ChunkFetcher();
  ChunkFetcher(const ChunkFetcher&) = delete;
  ChunkFetcher& operator=(const ChunkFetcher&) = delete;

  void Urgent(const ChunkRef& chunk, const ChunkCache::Ticket& ticket);
  void Ahead(const ChunkRef& chunk, const ChunkCache::Ticket& ticket);

  uint64_t stored_bytes_read() const { return stored_bytes_read_.load(); }
  uint64_t chunks_fetched() const { return chunks_fetched_.load(); }

 private:
  struct Job {
    ChunkRef chunk;
    ChunkCache::Ticket ticket;
  };
  void Work();
  void Fetch(pipeline::RecordCodec& codec, std::vector<uint8_t>* record, const Job& job);

  pipeline::Repository& repo_;
  ChunkCache& cache_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;   // GUARDED_BY(mu_): urgent at the front
  bool stopping_ = false;  // GUARDED_BY(mu_)
  std::atomic<uint64_t> stored_bytes_read_{0}, chunks_fetched_{0};
  std::vector<std::thread> threads_;
};

}  // namespace wanbackup::mount
