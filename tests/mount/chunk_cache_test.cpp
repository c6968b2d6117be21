#include "mount/chunk_cache.h"

#include <thread>

#include <catch2/catch.hpp>

namespace wanbackup::mount {
namespace {

Digest CacheKey(uint8_t n) {
  Digest d{};
  d[0] = n;
  d[1] = 1;
  return d;
}

std::vector<uint8_t> CacheBytes(size_t size, uint8_t value) {
  return std::vector<uint8_t>(size, value);
}

}  // namespace

TEST_CASE("chunk cache: the first Get fetches, later Gets share the entry", "[mount]") {
  ChunkCache cache(1u << 20);
  ChunkCache::Ticket first = cache.Get(CacheKey(1));
  CHECK(first.fetch);
  ChunkCache::Ticket second = cache.Get(CacheKey(1));
  CHECK_FALSE(second.fetch);
  CHECK(second.entry == first.entry);
  cache.Fill(first, CacheBytes(100, 7));
  Result<ChunkData> got = cache.Wait(second);
  REQUIRE(got.ok());
  CHECK((**got)[99] == 7);
  CHECK(cache.Holds(CacheKey(1)));
}

TEST_CASE("chunk cache: a waiter on another thread gets the bytes when they are filled",
          "[mount]") {
  ChunkCache cache(1u << 20);
  ChunkCache::Ticket mine = cache.Get(CacheKey(2));
  ChunkCache::Ticket theirs = cache.Get(CacheKey(2));
  uint8_t seen = 0;
  std::thread waiter([&] {
    Result<ChunkData> got = cache.Wait(theirs);
    if (got.ok()) seen = (**got)[0];
  });
  cache.Fill(mine, CacheBytes(10, 42));
  waiter.join();
  CHECK(seen == 42);
}

TEST_CASE("chunk cache: the least recently used chunks go when the capacity is passed", "[mount]") {
  ChunkCache cache(3000);
  for (uint8_t n = 1; n <= 3; ++n)
    cache.Fill(cache.Get(CacheKey(n)), CacheBytes(1000, n));
  cache.Get(CacheKey(1));  // used again: 2 is now the oldest
  cache.Fill(cache.Get(CacheKey(4)), CacheBytes(1000, 4));
  CHECK(cache.Holds(CacheKey(1)));
  CHECK_FALSE(cache.Holds(CacheKey(2)));
  CHECK(cache.Holds(CacheKey(3)));
  CHECK(cache.Holds(CacheKey(4)));
  CHECK(cache.stats().bytes == 3000);
  CHECK(cache.stats().evictions == 1);
}

TEST_CASE("chunk cache: an evicted chunk stays readable by the reader that holds it", "[mount]") {
  ChunkCache cache(1000);
  ChunkCache::Ticket held = cache.Get(CacheKey(1));
  cache.Fill(held, CacheBytes(1000, 9));
  cache.Fill(cache.Get(CacheKey(2)), CacheBytes(1000, 8));  // evicts 1
  CHECK_FALSE(cache.Holds(CacheKey(1)));
  Result<ChunkData> got = cache.Wait(held);
  REQUIRE(got.ok());
  CHECK((**got)[0] == 9);
}

TEST_CASE("chunk cache: a failed fetch fails its waiters and the next Get fetches again",
          "[mount]") {
  ChunkCache cache(1u << 20);
  ChunkCache::Ticket first = cache.Get(CacheKey(5));
  ChunkCache::Ticket waiting = cache.Get(CacheKey(5));
  cache.Fail(first, Status::Corruption("damaged"));
  Result<ChunkData> got = cache.Wait(waiting);
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().code() == StatusCode::kCorruption);
  CHECK_FALSE(cache.Holds(CacheKey(5)));
  ChunkCache::Ticket again = cache.Get(CacheKey(5));
  CHECK(again.fetch);
  CHECK(again.entry != first.entry);
}

}  // namespace wanbackup::mount
