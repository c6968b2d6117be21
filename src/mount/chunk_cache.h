// A bounded cache of opened chunks (plaintext), keyed by their sealed digest, shared by the
// mount's FUSE thread (which asks for chunks and waits for them) and its fetcher threads (which
// fill them). A chunk is fetched once however many reads wait for it: the first Get of a digest
// hands the caller the job of fetching it (Ticket::fetch), later Gets share the same entry.
// When the cached bytes pass the capacity, the least recently used filled chunks are dropped;
// a chunk a reader still holds lives on in its shared_ptr until that reader is done, so memory
// is at most the capacity plus one chunk per read and fetch in flight. A failed fetch is kept
// as failed for those already waiting; the next Get of that digest fetches it again.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "repository/keys.h"

namespace wanbackup::mount {

using Digest = pipeline::Digest;
using DigestHash = pipeline::DigestHash;
using ChunkData = std::shared_ptr<const std::vector<uint8_t>>;

struct CacheEntry {
  enum class State { kPending, kReady, kFailed };
  explicit CacheEntry(const Digest& d) : digest(d) {}
  const Digest digest;
  State state = State::kPending;  // GUARDED_BY(ChunkCache::mu_), as every field below
  ChunkData data;
  Status error;
  std::list<Digest>::iterator lru;  // kReady only: its place in the LRU list
};

class ChunkCache {
 public:
  struct Ticket {
    std::shared_ptr<CacheEntry> entry;
    bool fetch = false;  // the caller must fetch the chunk and call Fill or Fail
  };
  struct Stats {
    uint64_t hits = 0, misses = 0, evictions = 0, bytes = 0, entries = 0;
  };

  explicit ChunkCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  Ticket Get(const Digest& digest);
  void Fill(const Ticket& ticket, std::vector<uint8_t> data);
  void Fail(const Ticket& ticket, const Status& error);
  // Waits until the entry is filled or failed.
  Result<ChunkData> Wait(const Ticket& ticket);
  // Whether `digest` is cached and filled (tests, and read-ahead that skips what is there).
  bool Holds(const Digest& digest) const;
  Stats stats() const;

 private:
  void EvictLocked();  // REQUIRES: mu_ held

  const uint64_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::unordered_map<Digest, std::shared_ptr<CacheEntry>, DigestHash> entries_;  // GUARDED_BY(mu_)
  std::list<Digest> lru_;  // GUARDED_BY(mu_): filled entries, most recently used first
  Stats stats_;            // GUARDED_BY(mu_)
};

}  // namespace wanbackup::mount
