// Deallocated ranges ahead of the reader (pipeline/deallocation.h): how a range is classified
// against a thin source's deallocated extents, and how the source is asked, a window at a time.
#include "pipeline/deallocation.h"

#include <catch2/catch.hpp>

#include "support/memory_block_io.h"

using wanbackup::ByteRange;
using wanbackup::Status;
using wanbackup::pipeline::ClassifyRange;
using wanbackup::pipeline::DeallocationLookahead;
using wanbackup::pipeline::RangeClass;
using wanbackup::testing::MemorySource;

namespace {

bool Same(RangeClass a, RangeClass b) {
  return a.deallocated == b.deallocated && a.length == b.length;
}

}  // namespace

TEST_CASE("deallocation: a range is cut where it enters or leaves a deallocated extent",
          "[deallocation]") {
  const std::vector<ByteRange> d = {{100, 50}, {200, 100}};
  CHECK(Same(ClassifyRange(d, 0, 100), {false, 100}));  // ends where the extent starts
  CHECK(Same(ClassifyRange(d, 0, 120), {false, 100}));  // mapped up to the extent
  CHECK(Same(ClassifyRange(d, 100, 50), {true, 50}));   // exactly the extent
  CHECK(Same(ClassifyRange(d, 120, 100), {true, 30}));  // deallocated up to its end
  CHECK(Same(ClassifyRange(d, 150, 50), {false, 50}));  // between two extents
  CHECK(Same(ClassifyRange(d, 210, 20), {true, 20}));   // inside one
  CHECK(Same(ClassifyRange(d, 300, 10), {false, 10}));  // after the last
  CHECK(Same(ClassifyRange({}, 0, 4096), {false, 4096}));
}

TEST_CASE("deallocation: the source is asked a window ahead, then in doubling windows",
          "[deallocation]") {
  MemorySource source(std::vector<uint8_t>(64 << 10), 512);
  source.SetDeallocated({{0, 64 << 10}});
  DeallocationLookahead ahead(source, 0, 64 << 10, 4096);
  for (uint64_t off = 0; off < (64 << 10); off += 4096)
    CHECK(ahead.Deallocated(off, 4096));
  const std::vector<ByteRange> asked = source.deallocation_queries();
  CHECK(asked == std::vector<ByteRange>{
                     {0, 4096}, {4096, 8192}, {12288, 16384}, {28672, 32768}, {61440, 4096}});
}

TEST_CASE("deallocation: only what the source described may be skipped", "[deallocation]") {
  MemorySource source(std::vector<uint8_t>(16 << 10), 512);
  source.SetDeallocated({{0, 16 << 10}});
  DeallocationLookahead ahead(source, 0, 16 << 10, 4096);
  CHECK(ahead.Deallocated(0, 2048));  // asks about [0, 4096)
  // A request across the window's end: deallocated up to the end of what is known.
  const RangeClass c = ahead.Classify(2048, 4096);
  CHECK(c.deallocated);
  CHECK(c.length == 2048);
}

TEST_CASE("deallocation: after a refusal nothing is deallocated and nothing more is asked",
          "[deallocation]") {
  MemorySource source(std::vector<uint8_t>(64 << 10), 512);
  source.SetDeallocated({{0, 64 << 10}}, Status::Unsupported("ILLEGAL REQUEST"));
  DeallocationLookahead ahead(source, 0, 64 << 10, 4096);
  for (uint64_t off = 0; off < (64 << 10); off += 4096)
    CHECK_FALSE(ahead.Deallocated(off, 4096));
  CHECK(ahead.failed());
  CHECK(source.deallocation_queries().size() == 1);
}
