#include "pipeline/copier.h"

#include <catch2/catch.hpp>

#include "support/memory_block_io.h"

using wanbackup::Status;
using wanbackup::StatusCode;
using wanbackup::pipeline::Copy;
using wanbackup::pipeline::CopyOptions;
using wanbackup::testing::MemorySink;
using wanbackup::testing::MemorySource;

namespace {

std::vector<uint8_t> Pattern(size_t size, uint32_t seed = 7) {
  std::vector<uint8_t> v(size);
  uint32_t x = seed;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

}  // namespace

TEST_CASE("copier: out-of-order completions land bit-exact at their offsets", "[copier]") {
  const auto data = Pattern(5 * 65536 + 3 * 512);  // not a multiple of the request size
  MemorySource source(data, 512);
  MemorySink sink(false, false);
  auto result = Copy(source, sink, CopyOptions{});
  REQUIRE(result.ok());
  CHECK(result->bytes == data.size());
  CHECK(sink.bytes == data);
  CHECK(sink.finished);
  CHECK(sink.out_of_order_write);  // the source shuffled, and the copier did not wait
}

TEST_CASE("copier: a sink that needs order gets it", "[copier]") {
  const auto data = Pattern(40 * 65536);
  MemorySource source(data, 512, 8, 65536, 99);
  MemorySink sink(true, false);
  auto result = Copy(source, sink, CopyOptions{});
  REQUIRE(result.ok());
  CHECK(sink.bytes == data);
}

TEST_CASE("copier: buffers stay within the memory budget", "[copier]") {
  const auto data = Pattern(64 * 65536);
  MemorySource source(data, 512, 32, 65536);
  MemorySink sink(true, false);
  CopyOptions options;
  options.max_memory = 4 * 65536;
  auto result = Copy(source, sink, options);
  REQUIRE(result.ok());
  CHECK(result->peak_buffer_bytes <= 4 * 65536);
  CHECK(source.max_outstanding() <= 4);
  CHECK(sink.bytes == data);
}

TEST_CASE("copier: the tail is split evenly instead of left to one request", "[copier]") {
  const auto data = Pattern(20 * 65536);
  MemorySource source(data, 512, 8, 1 << 20);  // 1 MiB requests, 8 in flight, 1.25 MiB total
  MemorySink sink(false, false);
  auto result = Copy(source, sink, CopyOptions{});
  REQUIRE(result.ok());
  CHECK(sink.bytes == data);
  for (uint64_t size : source.request_sizes())
    CHECK(size <= 256u << 10);
}

TEST_CASE("copier: zero stretches become holes only where holes read as zeros", "[copier]") {
  auto data = Pattern(16 * 65536);
  std::fill(data.begin() + 3 * 65536, data.begin() + 11 * 65536, 0);
  {
    MemorySource source(data, 512);
    MemorySink sink(false, true);
    auto result = Copy(source, sink, CopyOptions{});
    REQUIRE(result.ok());
    CHECK(result->zero_bytes_skipped == 8 * 65536);
    CHECK(sink.bytes_written == 8 * 65536);
    CHECK(sink.bytes == data);
  }
  {
    MemorySource source(data, 512);
    MemorySink sink(false, false);
    auto result = Copy(source, sink, CopyOptions{});
    REQUIRE(result.ok());
    CHECK(result->zero_bytes_skipped == 0);
    CHECK(sink.bytes_written == data.size());
  }
}

TEST_CASE("copier: a range that cannot be read fails the copy with its reason", "[copier]") {
  const auto data = Pattern(32 * 65536);
  MemorySource source(data, 512);
  source.FailRange(10 * 65536, 512, Status::MediumError("READ(16) LBA 1280+1: medium error"));
  MemorySink sink(false, false);
  auto result = Copy(source, sink, CopyOptions{});
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == StatusCode::kMediumError);
  CHECK(result.status().message().find("LBA 1280") != std::string::npos);
  CHECK_FALSE(sink.finished);
}

TEST_CASE("copier: offset and length select a range that lands at the sink's start", "[copier]") {
  const auto data = Pattern(16 * 65536);
  MemorySource source(data, 512);
  MemorySink sink(false, false);
  CopyOptions options;
  options.offset = 4 * 65536;
  options.length = 3 * 65536 + 512;
  auto result = Copy(source, sink, options);
  REQUIRE(result.ok());
  CHECK(sink.bytes ==
        std::vector<uint8_t>(data.begin() + 4 * 65536, data.begin() + 7 * 65536 + 512));
  CopyOptions bad;
  bad.offset = 100;  // not a block boundary
  CHECK(Copy(source, sink, bad).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("copier: the steady rate covers the middle 80 % of the bytes", "[copier]") {
  const auto data = Pattern(40 * 65536);
  MemorySource source(data, 512, 4, 65536);
  MemorySink sink(false, false);  // done grows by one request per completion
  auto result = Copy(source, sink, CopyOptions{});
  REQUIRE(result.ok());
  // 64 KiB completions: the marks fall at 4 and 36 of the 40 requests.
  CHECK(result->steady_bytes == 32 * 65536);
  CHECK(result->steady_elapsed.count() > 0);
  CHECK(result->steady_elapsed <= result->elapsed);
}

TEST_CASE("copier: a copy done in one completion has no steady rate", "[copier]") {
  const auto data = Pattern(65536);
  MemorySource source(data, 512, 4, 65536);
  MemorySink sink(true, false);
  auto result = Copy(source, sink, CopyOptions{});
  REQUIRE(result.ok());
  CHECK(result->steady_bytes == 0);
  CHECK(result->steady_elapsed.count() == 0);
}

namespace {

using wanbackup::ByteRange;

// 32 requests of 64 KiB whose deallocated ranges (zeros in the data) a thin source reports:
// requests 4-11 whole, and half of request 20 (from its middle to the end of request 21).
struct ThinImage {
  std::vector<uint8_t> data = Pattern(32 * 65536);
  std::vector<ByteRange> deallocated = {{4 * 65536, 8 * 65536}, {20 * 65536 + 32768, 98304}};
  ThinImage() {
    for (const ByteRange& r : deallocated)
      std::fill_n(data.begin() + static_cast<std::ptrdiff_t>(r.offset), r.length, 0);
  }
};

bool ReadsOverlap(const std::vector<ByteRange>& reads, const std::vector<ByteRange>& ranges) {
  for (const ByteRange& read : reads) {
    for (const ByteRange& r : ranges) {
      if (read.offset < r.end() && r.offset < read.end()) return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE("copier: what a thin source reports deallocated is not read and lands as zeros",
          "[copier][thin]") {
  const ThinImage thin;
  for (bool ordered : {false, true}) {
    for (bool zeros_free : {false, true}) {
      INFO("ordered " << ordered << ", zeros free " << zeros_free);
      MemorySource source(thin.data, 512, 8, 65536, 3);
      source.SetDeallocated(thin.deallocated);
      MemorySink sink(ordered, zeros_free);
      auto result = Copy(source, sink, CopyOptions{});
      REQUIRE(result.ok());
      CHECK(sink.bytes == thin.data);
      CHECK(result->bytes_deallocated == 8 * 65536 + 98304);
      CHECK(source.Stats().bytes_read == thin.data.size() - result->bytes_deallocated);
      CHECK_FALSE(ReadsOverlap(source.reads(), thin.deallocated));
    }
  }
}

TEST_CASE("copier: a source that refuses to say what is deallocated is read whole",
          "[copier][thin]") {
  const ThinImage thin;
  MemorySource source(thin.data, 512);
  source.SetDeallocated(thin.deallocated, Status::Unsupported("GET LBA STATUS refused"));
  MemorySink sink(false, true);
  auto result = Copy(source, sink, CopyOptions{});
  REQUIRE(result.ok());
  CHECK(sink.bytes == thin.data);
  CHECK(result->bytes_deallocated == 0);
  CHECK(source.Stats().bytes_read == thin.data.size());
  CHECK(source.deallocation_queries().size() == 1);  // asked once, then never again
}
