#include "mount/read_ahead.h"

#include <catch2/catch.hpp>

namespace wanbackup::mount {
namespace {

constexpr uint32_t kRaChunk = 4u << 20;
constexpr uint64_t kRaRead = 128u << 10;  // what the kernel asks for at a time

ReadAheadOptions RaOptions() {
  ReadAheadOptions o;
  o.trigger_bytes = 1u << 20;
  o.initial_window = 2;
  o.max_window = 8;
  return o;
}

}  // namespace

TEST_CASE("read-ahead: random reads fetch nothing ahead", "[mount]") {
  ReadAhead ra(100ull * kRaChunk, kRaChunk, RaOptions());
  for (uint64_t c : {7, 3, 50, 12, 13, 90}) {
    CHECK(ra.OnRead(c * kRaChunk + 4096, kRaRead).empty());
  }
}

TEST_CASE("read-ahead: a sequential reader gets the next chunks once its run passes the trigger",
          "[mount]") {
  ReadAhead ra(100ull * kRaChunk, kRaChunk, RaOptions());
  uint64_t offset = 0;
  for (int i = 0; i < 7; ++i, offset += kRaRead)  // 896 KiB: below the 1 MiB trigger
    REQUIRE(ra.OnRead(offset, kRaRead).empty());
  CHECK(ra.OnRead(offset, kRaRead) == std::vector<uint64_t>{1, 2});
  offset += kRaRead;
  // The rest of chunk 0: nothing new to ask for.
  for (; offset < kRaChunk; offset += kRaRead)
    CHECK(ra.OnRead(offset, kRaRead).empty());
  // Entering chunk 1 doubles the window: chunks 3..5 are new (2 was asked for).
  CHECK(ra.OnRead(offset, kRaRead) == std::vector<uint64_t>{3, 4, 5});
}

TEST_CASE("read-ahead: the window stops doubling at its maximum and never passes the end",
          "[mount]") {
  ReadAhead ra(20ull * kRaChunk, kRaChunk, RaOptions());
  std::vector<uint64_t> asked;
  for (uint64_t offset = 0; offset < 20ull * kRaChunk; offset += kRaRead) {
    for (uint64_t c : ra.OnRead(offset, kRaRead))
      asked.push_back(c);
    CHECK(ra.window() <= 8);
  }
  CHECK(ra.window() == 8);
  std::vector<uint64_t> expected;
  for (uint64_t c = 1; c < 20; ++c)
    expected.push_back(c);
  CHECK(asked == expected);  // each chunk once, in order, none past the last
}

TEST_CASE("read-ahead: a jump ends the run and asks again only after a new one", "[mount]") {
  ReadAhead ra(100ull * kRaChunk, kRaChunk, RaOptions());
  CHECK(ra.OnRead(0, 2u << 20) == std::vector<uint64_t>{1, 2});
  CHECK(ra.OnRead(40ull * kRaChunk, kRaRead).empty());
  CHECK(ra.window() == 0);
  CHECK(ra.OnRead(40ull * kRaChunk + kRaRead, 1u << 20) == std::vector<uint64_t>{41, 42});
}

TEST_CASE("read-ahead: a trigger it never reaches means none at all", "[mount]") {
  ReadAheadOptions o = RaOptions();
  o.trigger_bytes = UINT64_MAX;
  ReadAhead ra(10ull * kRaChunk, kRaChunk, o);
  for (uint64_t offset = 0; offset < 10ull * kRaChunk; offset += kRaRead)
    REQUIRE(ra.OnRead(offset, kRaRead).empty());
}

TEST_CASE("read-ahead: the window fits in half the cache, and is at least one chunk", "[mount]") {
  CHECK(FitToCache(RaOptions(), 256u << 20, kRaChunk).max_window == 8);  // 32 of 128 MiB
  CHECK(FitToCache(RaOptions(), 32u << 20, kRaChunk).max_window == 4);   // 16 MiB
  const ReadAheadOptions big = FitToCache(RaOptions(), 256u << 20, 64u << 20);
  CHECK(big.max_window == 2);
  CHECK(big.initial_window == 2);
  const ReadAheadOptions tiny = FitToCache(RaOptions(), 16u << 20, 64u << 20);
  CHECK(tiny.max_window == 1);
  CHECK(tiny.initial_window == 1);
}

}  // namespace wanbackup::mount
