#include "mount/chunk_cache.h"

namespace wanbackup::mount {

ChunkCache::Ticket ChunkCache::Get(const Digest& digest) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(digest);
  if (it != entries_.end() && it->second->state != CacheEntry::State::kFailed) {
    std::shared_ptr<CacheEntry> entry = it->second;
    if (entry->state == CacheEntry::State::kReady) {
      lru_.splice(lru_.begin(), lru_, entry->lru);  // most recently used now
    }
    ++stats_.hits;
    return {entry, false};
  }
  // Absent, or failed before: fetch it (again). Waiters on a failed entry keep their error.
  auto entry = std::make_shared<CacheEntry>(digest);
  entries_[digest] = entry;
  ++stats_.misses;
  return {entry, true};
}

void ChunkCache::Fill(const Ticket& ticket, std::vector<uint8_t> data) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    CacheEntry& e = *ticket.entry;
    e.data = std::make_shared<const std::vector<uint8_t>>(std::move(data));
    e.state = CacheEntry::State::kReady;
    auto it = entries_.find(e.digest);
    if (it != entries_.end() && it->second == ticket.entry) {
      lru_.push_front(e.digest);
      e.lru = lru_.begin();
      stats_.bytes += e.data->size();
      EvictLocked();
    }
  }
  changed_.notify_all();
}

void ChunkCache::Fail(const Ticket& ticket, const Status& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket.entry->error = error;
    ticket.entry->state = CacheEntry::State::kFailed;
  }
  changed_.notify_all();
}

Result<ChunkData> ChunkCache::Wait(const Ticket& ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  const CacheEntry& e = *ticket.entry;
  changed_.wait(lock, [&e] { return e.state != CacheEntry::State::kPending; });
  if (e.state == CacheEntry::State::kFailed) return e.error;
  return e.data;
}

bool ChunkCache::Holds(const Digest& digest) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(digest);
  return it != entries_.end() && it->second->state == CacheEntry::State::kReady;
}

ChunkCache::Stats ChunkCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.entries = lru_.size();
  return s;
}

void ChunkCache::EvictLocked() {
  // Keep the newest entry even when it alone passes the capacity: the read waiting for it
  // holds it anyway.
  while (stats_.bytes > capacity_ && lru_.size() > 1) {
    auto it = entries_.find(lru_.back());
    stats_.bytes -= it->second->data->size();
    entries_.erase(it);
    lru_.pop_back();
    ++stats_.evictions;
  }
}

}  // namespace wanbackup::mount
