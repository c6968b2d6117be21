// Sealed snapshot records: the codecs, and what the snapshotter seals.
#include "repository/snapshot_record.h"

#include <catch2/catch.hpp>

#include "pipeline/snapshotter.h"
#include "repository/snapshot_check.h"
#include "support/memory_block_io.h"
#include "support/temp_dir.h"

using wanbackup::Secret;
using wanbackup::StatusCode;
using wanbackup::testing::TempDir;
using namespace wanbackup::pipeline;

namespace {

Digest DigestOf(uint8_t seed) {
  Digest d{};
  for (size_t i = 0; i < d.size(); ++i)
    d[i] = static_cast<uint8_t>(seed * 31 + i);
  return d;
}

SnapshotRecord Sample() {
  SnapshotRecord r;
  r.repository_id = "00112233445566778899aabbccddeeff";
  r.info.id = 7;
  r.info.source = "iscsi://san/iqn.2001-05.com.example:db/1";
  r.info.tag = "nightly";
  r.info.hostname = "backup1";
  r.info.size_bytes = (kSealedSegmentChunks + 3) * 65536;
  r.info.block_size = 512;
  r.info.chunk_size = 65536;
  r.info.started_unix_ms = 1764000000000;
  r.info.finished_unix_ms = 1764000001234;
  r.info.chunks_total = kSealedSegmentChunks + 3;
  r.segments = {DigestOf(1), DigestOf(2)};
  return r;
}

}  // namespace

TEST_CASE("snapshot record: a map segment round-trips, zero digests included", "[record]") {
  const std::vector<Digest> digests = {DigestOf(1), kZeroChunkDigest, DigestOf(3)};
  const std::string bytes = EncodeMapSegment(digests);
  auto decoded = DecodeMapSegment(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  REQUIRE(decoded.ok());
  CHECK(*decoded == digests);
}

TEST_CASE("snapshot record: a map segment with a wrong count or size is refused", "[record]") {
  std::string bytes = EncodeMapSegment({DigestOf(1), DigestOf(2)});
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  CHECK(DecodeMapSegment(p, bytes.size() - 1).status().code() == StatusCode::kCorruption);
  CHECK(DecodeMapSegment(p, 3).status().code() == StatusCode::kCorruption);
  bytes[8] = 3;  // claims three entries
  CHECK(DecodeMapSegment(p, bytes.size()).status().code() == StatusCode::kCorruption);
  bytes[8] = 0;  // none
  CHECK_FALSE(DecodeMapSegment(p, bytes.size()).ok());
}

TEST_CASE("snapshot record: the metadata and segment list round-trip", "[record]") {
  const SnapshotRecord r = Sample();
  const std::string bytes = EncodeSnapshotRecord(r).value();
  auto decoded = DecodeSnapshotRecord(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  REQUIRE(decoded.ok());
  CHECK(decoded->repository_id == r.repository_id);
  CHECK(decoded->info.id == 7);
  CHECK(decoded->info.source == r.info.source);
  CHECK(decoded->info.tag == "nightly");
  CHECK(decoded->info.size_bytes == r.info.size_bytes);
  CHECK(decoded->info.finished_unix_ms == r.info.finished_unix_ms);
  CHECK(decoded->segments == r.segments);
}

TEST_CASE("snapshot record: the job name is sealed, and a record without one still decodes",
          "[record]") {
  SnapshotRecord r = Sample();
  r.info.job = "db-hourly";
  const std::string bytes = EncodeSnapshotRecord(r).value();
  auto decoded = DecodeSnapshotRecord(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  REQUIRE(decoded.ok());
  CHECK(decoded->info.job == "db-hourly");
  // A snapshot taken by hand (or by a wanbackup before job names) has no "job" key at all.
  const std::string old = EncodeSnapshotRecord(Sample()).value();
  CHECK(old.find("\"job\"") == std::string::npos);
  auto decoded_old = DecodeSnapshotRecord(reinterpret_cast<const uint8_t*>(old.data()), old.size());
  REQUIRE(decoded_old.ok());
  CHECK(decoded_old->info.job.empty());
}

TEST_CASE("snapshot record: a segment list that does not fit the size is refused", "[record]") {
  SnapshotRecord r = Sample();
  r.segments.pop_back();
  const std::string bytes = EncodeSnapshotRecord(r).value();
  CHECK(DecodeSnapshotRecord(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())
            .status()
            .code() == StatusCode::kCorruption);
  const std::string junk = "{\"version\": 1}";
  CHECK(DecodeSnapshotRecord(reinterpret_cast<const uint8_t*>(junk.data()), junk.size())
            .status()
            .code() == StatusCode::kCorruption);
}

TEST_CASE("snapshot record: a snapshot is sealed and an unchanged map segment is stored once",
          "[record]") {
  TempDir dir("sealed");
  InitOptions init;
  init.chunk_size = 64 << 10;
  init.credentials.passphrase = Secret("pw");
  init.kdf.opslimit = 1;
  init.kdf.memlimit = 8 << 20;
  REQUIRE(Repository::Init(dir / "repo", init).ok());
  Credentials c;
  c.passphrase = Secret("pw");
  auto repo = Repository::Open(dir / "repo", c, OpenMode::kWrite);
  REQUIRE(repo.ok());
  std::vector<uint8_t> image(20 * 65536);
  for (size_t i = 0; i < image.size(); ++i)
    image[i] = static_cast<uint8_t>(i * 7 / 65536 + i);
  wanbackup::testing::MemorySource a(image, 1), b(image, 1);
  auto first = TakeSnapshot(**repo, a, SnapshotOptions{});
  REQUIRE(first.ok());
  const uint64_t records = (*repo)->catalog().Stats().value().chunks;
  auto second = TakeSnapshot(**repo, b, SnapshotOptions{});
  REQUIRE(second.ok());
  // Only the second snapshot record (and the head listing it) is new: its map segment is the
  // first one's.
  CHECK((*repo)->catalog().Stats().value().chunks == records + 2);
  CHECK(second->info.record_id != first->info.record_id);
  CHECK(CheckSnapshotAgainstRecord(**repo, first->info, true).ok());
  CHECK(CheckSnapshotAgainstRecord(**repo, second->info, true).ok());
}

TEST_CASE("snapshot record: a chunk index past the sealed map is corruption, never read",
          "[record]") {
  TempDir dir("sealed-bounds");
  InitOptions init;
  init.chunk_size = 64 << 10;
  init.credentials.passphrase = Secret("pw");
  init.kdf.opslimit = 1;
  init.kdf.memlimit = 8 << 20;
  REQUIRE(Repository::Init(dir / "repo", init).ok());
  Credentials c;
  c.passphrase = Secret("pw");
  auto repo = Repository::Open(dir / "repo", c, OpenMode::kWrite);
  REQUIRE(repo.ok());
  std::vector<uint8_t> image(20 * 65536, 7);
  wanbackup::testing::MemorySource source(image, 1);
  auto snap = TakeSnapshot(**repo, source, SnapshotOptions{});
  REQUIRE(snap.ok());
  RecordCodec codec((*repo)->keys(), 0);
  auto record = LoadMatchingRecord(**repo, codec, snap->info);
  REQUIRE(record.ok());
  SealedMap map(**repo, codec, *record);
  CHECK(map.At(19).ok());
  // A catalog map row of 21 entries asks for chunk 20: the segment holds 20 digests.
  CHECK(map.At(20).status().code() == StatusCode::kCorruption);
  CHECK(map.At(kSealedSegmentChunks).status().code() == StatusCode::kCorruption);
  CHECK(map.Segment(1).status().code() == StatusCode::kCorruption);
}

TEST_CASE("snapshot record: a number that is a float, negative or too large is corruption",
          "[record]") {
  const SnapshotRecord r = Sample();
  const std::string good = EncodeSnapshotRecord(r).value();
  // Each edit replaces one integer field's value; the fuzzer found the float cases (a float
  // out of an integer's range was undefined behaviour inside the JSON library).
  const std::pair<std::string, std::string> edits[] = {
      {"\"version\":1", "\"version\":6.6e33"},
      {"\"block_size\":512", "\"block_size\":512.5"},
      {"\"block_size\":512", "\"block_size\":-512"},
      {"\"block_size\":512", "\"block_size\":4294967808"},
      {"\"id\":7", "\"id\":1.764e23"},
      {"\"id\":7", "\"id\":true"},
  };
  for (const auto& [from, to] : edits) {
    std::string bytes = good;
    const size_t at = bytes.find(from);
    REQUIRE(at != std::string::npos);
    bytes.replace(at, from.size(), to);
    CAPTURE(bytes.substr(0, 80), to);
    CHECK(DecodeSnapshotRecord(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())
              .status()
              .code() == StatusCode::kCorruption);
  }
  ForgetRecord f;
  f.repository_id = r.repository_id;
  f.forgotten_unix_ms = 1764000000000;
  f.snapshots.push_back({7, DigestOf(9)});
  std::string bytes = EncodeForgetRecord(f);
  const size_t at = bytes.find("\"id\":7");
  REQUIRE(at != std::string::npos);
  bytes.replace(at, 6, "\"id\":7e300");
  CHECK(DecodeForgetRecord(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())
            .status()
            .code() == StatusCode::kCorruption);
}

TEST_CASE("snapshot record: text JSON cannot hold is refused, never thrown", "[unit]") {
  SnapshotRecord r;
  r.repository_id = "repo";
  r.info.id = 7;
  r.info.source = "/dev/disk\xFE";
  wanbackup::Result<std::string> bad = EncodeSnapshotRecord(r);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "snapshot 7: its source is not UTF-8 text, which a snapshot record cannot hold");
  r.info.source = "/dev/sdb";
  r.info.hostname = "host\xC3";
  CHECK(EncodeSnapshotRecord(r).status().message().find("its host name") != std::string::npos);
}
