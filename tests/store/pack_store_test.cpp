// The PackStore conformance suite: every store (the local directory, S3) passes the same
// checks of the interface (store/pack_store.h). The S3 cases run against the real radosgw of
// the s3lab fixture, across the emulated WAN ([s3lab]: integration tests).
#include "store/pack_store.h"

#include <functional>
#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "store/s3_lab.h"
#include "store/s3_pack_store.h"
#include "support/temp_dir.h"

using namespace wanbackup;
using namespace wanbackup::pipeline;

namespace {

const std::string kRepoId = "00112233445566778899aabbccddeeff";
const std::string kPackA = "a1000000000000000000000000000001";
const std::string kPackB = "b2000000000000000000000000000002";

std::vector<uint8_t> Pattern(size_t size, uint8_t seed) {
  std::vector<uint8_t> v(size);
  for (size_t i = 0; i < size; ++i)
    v[i] = static_cast<uint8_t>(i * 31 + seed + (i >> 12));
  return v;
}

// Writes a pack of `records` appended in pieces, synced after each.
void WritePack(PackStore& store, const std::string& name, const std::vector<uint8_t>& records) {
  Result<std::unique_ptr<PackWriter>> w = store.Create(name, kRepoId);
  REQUIRE(w.ok());
  const size_t half = records.size() / 2;
  REQUIRE((*w)->Append(records.data(), half).value() == kPackHeaderSize);
  REQUIRE((*w)->Sync().ok());
  REQUIRE((*w)->Append(records.data() + half, records.size() - half).value() ==
          kPackHeaderSize + half);
  REQUIRE((*w)->Sync().ok());
  CHECK((*w)->size() == kPackHeaderSize + records.size());
}

void CheckWriteThenReadRanges(PackStore& store) {
  const std::vector<uint8_t> records = Pattern(300'000, 7);
  WritePack(store, kPackA, records);
  Result<std::unique_ptr<PackReader>> r = store.Open(kPackA);
  REQUIRE(r.ok());
  CHECK((*r)->Size().value() == kPackHeaderSize + records.size());
  CHECK(CheckPackHeader(**r, kRepoId, store.Describe(kPackA)).ok());
  for (const auto& [offset, size] : std::vector<std::pair<size_t, size_t>>{
           {0, 1}, {12'345, 70'000}, {records.size() - 10, 10}, {150'000, 150'000}}) {
    std::vector<uint8_t> got(size);
    REQUIRE((*r)->ReadAt(kPackHeaderSize + offset, got.data(), size).ok());
    CHECK(std::equal(got.begin(), got.end(), records.begin() + static_cast<ptrdiff_t>(offset)));
  }
  std::vector<uint8_t> past(20);
  const Status s = (*r)->ReadAt(kPackHeaderSize + records.size() - 10, past.data(), past.size());
  CHECK(s.code() == StatusCode::kCorruption);
  CHECK_FALSE(CheckPackHeader(**r, "ffffffffffffffffffffffffffffffff", "x").ok());
}

void CheckListAndRemove(PackStore& store) {
  Result<std::vector<StoredPack>> empty = store.List();
  REQUIRE(empty.ok());
  CHECK(empty->empty());
  WritePack(store, kPackA, Pattern(1000, 1));
  WritePack(store, kPackB, Pattern(2000, 2));
  Result<std::vector<StoredPack>> listed = store.List();
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 2);
  for (const StoredPack& p : *listed) {
    CHECK(p.size == kPackHeaderSize + (p.name == kPackA ? 1000 : 2000));
  }
  CHECK((*listed)[0].mtime_ns <= (*listed)[1].mtime_ns);
  REQUIRE(store.Remove(kPackA).ok());
  REQUIRE(store.Remove(kPackA).ok());  // already gone: not an error
  // A directory says so when the pack is opened; object storage, which opens without a
  // request, at the first read.
  Result<std::unique_ptr<PackReader>> gone = store.Open(kPackA);
  uint8_t byte = 0;
  const Status missing = gone.ok() ? (*gone)->ReadAt(0, &byte, 1) : gone.status();
  CHECK(missing.code() == StatusCode::kCorruption);
  Result<std::vector<StoredPack>> after = store.List();
  REQUIRE(after.ok());
  REQUIRE(after->size() == 1);
  CHECK((*after)[0].name == kPackB);
}

// A reader opened while the pack is still written sees what later Syncs add, as a local file
// does.
void CheckReaderSeesGrowth(PackStore& store) {
  const std::vector<uint8_t> records = Pattern(50'000, 9);
  Result<std::unique_ptr<PackWriter>> w = store.Create(kPackA, kRepoId);
  REQUIRE(w.ok());
  REQUIRE((*w)->Append(records.data(), 20'000).ok());
  REQUIRE((*w)->Sync().ok());
  Result<std::unique_ptr<PackReader>> r = store.Open(kPackA);
  REQUIRE(r.ok());
  CHECK((*r)->Size().value() == kPackHeaderSize + 20'000);
  REQUIRE((*w)->Append(records.data() + 20'000, 30'000).ok());
  REQUIRE((*w)->Sync().ok());
  CHECK((*r)->Size().value() == kPackHeaderSize + records.size());
  std::vector<uint8_t> got(40'000);
  REQUIRE((*r)->ReadAt(kPackHeaderSize + 10'000, got.data(), got.size()).ok());
  CHECK(std::equal(got.begin(), got.end(), records.begin() + 10'000));
}

std::unique_ptr<PackStore> LabStore() {
  const testing::S3Lab& lab = testing::S3Lab::Get();
  Result<std::unique_ptr<PackStore>> store =
      NewS3PackStore(lab.NewLocation(), lab.Credentials(), S3Options{});
  REQUIRE(store.ok());
  return std::move(*store);
}

}  // namespace

TEST_CASE("pack store, local: a pack reads back in ranges and ends where it was written",
          "[store]") {
  testing::TempDir dir("packs");
  std::unique_ptr<PackStore> store = NewLocalPackStore(dir.path());
  CheckWriteThenReadRanges(*store);
}

TEST_CASE("pack store, local: list names every pack and remove is idempotent", "[store]") {
  testing::TempDir dir("packs");
  std::unique_ptr<PackStore> store = NewLocalPackStore(dir.path());
  CheckListAndRemove(*store);
}

TEST_CASE("pack store, s3: a pack reads back in ranges and ends where it was written",
          "[store][s3lab]") {
  std::unique_ptr<PackStore> store = LabStore();
  CheckWriteThenReadRanges(*store);
}

TEST_CASE("pack store, s3: list names every pack and remove is idempotent", "[store][s3lab]") {
  std::unique_ptr<PackStore> store = LabStore();
  CheckListAndRemove(*store);
}

TEST_CASE("pack store, local: a reader open while the pack is written sees what later syncs add",
          "[store]") {
  testing::TempDir dir("packs");
  std::unique_ptr<PackStore> store = NewLocalPackStore(dir.path());
  CheckReaderSeesGrowth(*store);
}

TEST_CASE("pack store, s3: a reader open while the pack is written sees what later syncs add",
          "[store][s3lab]") {
  std::unique_ptr<PackStore> store = LabStore();
  CheckReaderSeesGrowth(*store);
}
