// Reading record headers ahead for a cache rebuild (repository/internal/header_prefetch.h):
// what a walk did not ask for is dropped when it leaves its pack, whichever way it leaves.
#include "repository/internal/header_prefetch.h"

#include <cstdint>
#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "common/result.h"
#include "store/pack.h"

using wanbackup::Result;
using wanbackup::Status;
using wanbackup::pipeline::PackReader;
using wanbackup::pipeline::internal::ForgetAhead;
using wanbackup::pipeline::internal::PrefetchedReader;

namespace {

// A pack of 1 KiB in memory that counts the reads that reach it.
class CountedPack final : public PackReader {
 public:
  explicit CountedPack(int* reads) : reads_(reads) {}
  Status ReadAt(uint64_t offset, uint8_t* data, size_t size) const override {
    ++*reads_;
    for (size_t i = 0; i < size; ++i)
      data[i] = static_cast<uint8_t>(offset + i);
    return Status::Ok();
  }
  Result<uint64_t> Size() const override { return uint64_t{1024}; }

 private:
  int* reads_;
};

}  // namespace

TEST_CASE(
    "header prefetch: headers read ahead that the walk did not take are dropped once it leaves "
    "the pack early, and a read there goes to the store again",
    "[prefetch]") {
  int reads = 0;
  PrefetchedReader reader(std::make_unique<CountedPack>(&reads));
  std::vector<uint8_t> bytes(64);
  REQUIRE(reader.ReadAhead(0, bytes.data(), 32).ok());
  REQUIRE(reader.ReadAhead(32, bytes.data(), 64).ok());
  REQUIRE(reader.ReadAhead(96, bytes.data(), 64).ok());
  CHECK(reads == 3);
  {
    const ForgetAhead forget(&reader);
    REQUIRE(reader.ReadAt(0, bytes.data(), 32).ok());  // from memory
    CHECK(reads == 3);
    // The walk leaves here (a pack left out, an error): the headers at 32 and 96 stay unread.
  }
  REQUIRE(reader.ReadAt(32, bytes.data(), 64).ok());
  CHECK(reads == 4);
  CHECK(bytes[0] == 32);
  REQUIRE(reader.ReadAt(96, bytes.data(), 64).ok());
  CHECK(reads == 5);
}
