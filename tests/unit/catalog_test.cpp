#include "catalog/catalog.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include <catch2/catch.hpp>
#include <sqlite3.h>

#include "support/temp_dir.h"

using wanbackup::StatusCode;
using namespace wanbackup::catalog;

namespace {

struct TempDb {
  wanbackup::testing::TempDir tmp{"catalog"};
  std::string dir = tmp.path();
  std::string path = tmp / "catalog.db";
};

Digest D(uint8_t b) {
  Digest d{};
  d.fill(b);
  return d;
}

}  // namespace

TEST_CASE("catalog: a new catalog has the current schema and reopens", "[catalog]") {
  TempDb db;
  {
    auto c = Catalog::Open(db.path, true);
    REQUIRE(c.ok());
    CHECK((*c)->schema_version() == kSchemaVersion);
  }
  auto again = Catalog::Open(db.path, false);
  REQUIRE(again.ok());
  CHECK((*again)->schema_version() == kSchemaVersion);
  CHECK(Catalog::Open(db.dir + "/missing.db", false).status().code() == StatusCode::kNotFound);
}

TEST_CASE("catalog: chunks are found by digest, and only committed work survives", "[catalog]") {
  TempDb db;
  auto c = std::move(Catalog::Open(db.path, true)).value();
  {
    auto txn = std::move(c->Begin()).value();
    const int64_t pack = c->AddPack("aa00").value();
    ChunkRecord chunk;
    chunk.digest = D(1);
    chunk.pack_id = pack;
    chunk.offset = 32;
    chunk.stored_size = 100;
    chunk.raw_size = 4096;
    const int64_t id = c->AddChunk(chunk).value();
    CHECK(c->FindChunk(D(1)).value() == id);  // visible inside the transaction
    REQUIRE(txn->Commit().ok());
  }
  {
    auto txn = std::move(c->Begin()).value();
    ChunkRecord other;
    other.digest = D(2);
    other.pack_id = 1;
    REQUIRE(c->AddChunk(other).ok());
    // txn destroyed without Commit: rolled back
  }
  CHECK(c->FindChunk(D(1)).value().has_value());
  CHECK_FALSE(c->FindChunk(D(2)).value().has_value());
  const ChunkRecord got = c->GetChunk(*c->FindChunk(D(1)).value()).value();
  CHECK(got.offset == 32);
  CHECK(got.raw_size == 4096);
  CHECK(got.digest == D(1));
  CHECK(c->GetChunk(999).status().code() == StatusCode::kCorruption);
}

TEST_CASE("catalog: a snapshot is invisible until finished, and a run left running is closed",
          "[catalog]") {
  TempDb db;
  auto c = std::move(Catalog::Open(db.path, true)).value();
  SnapshotInfo info;
  info.source = "iscsi://h/t/1";
  info.size_bytes = 3 * 4096 + 100;
  info.block_size = 1;
  info.chunk_size = 4096;
  int64_t first = 0;
  {
    auto txn = std::move(c->Begin()).value();
    first = c->BeginSnapshot(info).value();
    REQUIRE(txn->Commit().ok());
  }
  CHECK(c->Snapshots(false).value().empty());
  CHECK(c->Snapshots(true).value().size() == 1);
  {
    auto txn = std::move(c->Begin()).value();
    REQUIRE(c->PutMapSegment(first, 0, {1, 0, 1, 2}).ok());
    info.id = first;
    info.finished_unix_ms = 42;
    info.chunks_total = 4;
    REQUIRE(c->FinishSnapshot(info).ok());
    REQUIRE(txn->Commit().ok());
  }
  auto done = c->Snapshots(false).value();
  REQUIRE(done.size() == 1);
  CHECK(done[0].status == SnapshotStatus::kComplete);
  CHECK(done[0].chunks_total == 4);
  std::vector<int64_t> seen;
  REQUIRE(c->ForEachMapSegment(first, [&](uint64_t, const std::vector<int64_t>& ids) {
             seen = ids;
             return wanbackup::Status::Ok();
           }).ok());
  CHECK(seen == std::vector<int64_t>{1, 0, 1, 2});

  int64_t second = 0;
  {
    auto txn = std::move(c->Begin()).value();
    second = c->BeginSnapshot(info).value();
    REQUIRE(c->PutMapSegment(second, 0, {1, 1, 1, 1}).ok());
    REQUIRE(txn->Commit().ok());
  }
  {
    auto txn = std::move(c->Begin()).value();
    CHECK(c->AbandonRunningSnapshots().value() == 1);
    REQUIRE(txn->Commit().ok());
  }
  CHECK(c->GetSnapshot(second).value().status == SnapshotStatus::kFailed);
  CHECK(c->Snapshots(false).value().size() == 1);
}

TEST_CASE("catalog: a map with a missing segment is reported as corruption", "[catalog]") {
  TempDb db;
  auto c = std::move(Catalog::Open(db.path, true)).value();
  SnapshotInfo info;
  info.source = "x";
  info.size_bytes = (kMapSegmentChunks + 10) * 512;
  info.chunk_size = 512;
  auto txn = std::move(c->Begin()).value();
  const int64_t id = c->BeginSnapshot(info).value();
  REQUIRE(c->PutMapSegment(id, kMapSegmentChunks, std::vector<int64_t>(10, 0)).ok());
  REQUIRE(txn->Commit().ok());
  auto s = c->ForEachMapSegment(
      id, [](uint64_t, const std::vector<int64_t>&) { return wanbackup::Status::Ok(); });
  CHECK(s.code() == StatusCode::kCorruption);
  CHECK(s.message().find("missing") != std::string::npos);
}

TEST_CASE("catalog: a transaction commits once, and committing it again is an error, not a crash",
          "[catalog]") {
  TempDb db;
  auto c = std::move(Catalog::Open(db.path, true)).value();
  auto txn = std::move(c->Begin()).value();
  REQUIRE(c->AddPack("aa00").ok());
  REQUIRE(txn->Commit().ok());
  CHECK(txn->Commit().code() == StatusCode::kInternal);
  CHECK(c->Packs().value().size() == 1);
}

TEST_CASE("catalog: a job keeps its newest finished runs and every running one", "[catalog]") {
  TempDb db;
  auto c = std::move(Catalog::Open(db.path, true)).value();
  const auto add = [&c](const std::string& job, const std::string& status) {
    JobRun run;
    run.job = job;
    run.status = status;
    return c->AddJobRun(run).value();
  };
  auto tx = std::move(c->Begin()).value();
  const int64_t stuck = add("nightly", "running");  // killed long ago, never closed
  const int64_t first = add("nightly", "ok");
  for (int i = 0; i < 3; ++i)
    add("hourly", "failed");
  int64_t last = 0;
  for (int i = 0; i < Catalog::kJobRunsKept + 4; ++i)
    last = add("nightly", i % 2 ? "ok" : "failed");
  REQUIRE(tx->Commit().ok());

  const std::vector<JobRun> nightly = c->JobRuns("nightly", 10 * Catalog::kJobRunsKept).value();
  REQUIRE(nightly.size() == static_cast<size_t>(Catalog::kJobRunsKept) + 1);
  CHECK(nightly.front().id == last);
  CHECK(nightly.back().id == stuck);
  CHECK(std::none_of(nightly.begin(), nightly.end(),
                     [first](const JobRun& r) { return r.id == first; }));
  CHECK(c->JobRuns("hourly", 100).value().size() == 3);  // another job's history is its own
}

TEST_CASE(
    "job history file: holds the job_runs table alone, keeps its rows across reopening, and "
    "is not made when only read",
    "[catalog]") {
  TempDb db;
  const std::string path = db.tmp / "job-history.db";
  const std::chrono::milliseconds wait(1000);
  CHECK(JobRunStore::OpenFile(path, false, wait).status().code() == StatusCode::kNotFound);
  CHECK(::access(path.c_str(), F_OK) != 0);
  int64_t id = 0;
  {
    auto h = std::move(JobRunStore::OpenFile(path, true, wait)).value();
    JobRun run;
    run.job = "db";
    run.status = "running";
    run.pid_started = 42;
    id = h->AddJobRun(run).value();
    run.id = id;
    run.status = "ok";
    REQUIRE(h->UpdateJobRun(run).ok());
    run.id = id + 1;
    CHECK(h->UpdateJobRun(run).code() == StatusCode::kNotFound);
  }
  auto h = std::move(JobRunStore::OpenFile(path, false, wait)).value();
  const std::vector<JobRun> runs = h->JobRuns("", 10).value();
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].id == id);
  CHECK(runs[0].status == "ok");
  CHECK(runs[0].pid_started == 42);
  // A catalog is not a history file, nor is a history file a catalog.
  REQUIRE(Catalog::Open(db.path, true).ok());
  CHECK(JobRunStore::OpenFile(db.path, false, wait).status().code() == StatusCode::kUnsupported);
  CHECK_FALSE(Catalog::Open(path, false).ok());
}

TEST_CASE("catalog: a snapshot's job is kept, and a schema 4 catalog gains the column empty",
          "[catalog]") {
  TempDb db;
  SnapshotInfo info;
  info.source = "/dev/sda";
  info.job = "db-hourly";
  info.size_bytes = 4096;
  info.block_size = 512;
  info.chunk_size = 4096;
  info.started_unix_ms = 1;
  {
    auto c = std::move(Catalog::Open(db.path, true)).value();
    const int64_t id = c->BeginSnapshot(info).value();
    CHECK(c->GetSnapshot(id).value().job == "db-hourly");
  }
  // As a wanbackup before job names left it: schema 4, without the columns 5 added.
  sqlite3* raw = nullptr;
  REQUIRE(sqlite3_open(db.path.c_str(), &raw) == SQLITE_OK);
  CHECK(sqlite3_exec(raw,
                     "ALTER TABLE snapshots DROP COLUMN job; "
                     "ALTER TABLE job_runs DROP COLUMN pid_started; "
                     "ALTER TABLE replicas DROP COLUMN seal; PRAGMA user_version = 4;",
                     nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(raw);
  auto c = std::move(Catalog::Open(db.path, false)).value();
  CHECK(c->schema_version() == kSchemaVersion);
  const std::vector<SnapshotInfo> all = c->Snapshots(true).value();
  REQUIRE(all.size() == 1);
  CHECK(all[0].job.empty());
  CHECK(all[0].source == "/dev/sda");
  // Schema 6's replica seal is kept, and read back as written.
  Replica r;
  r.identity = "file:1:2";
  r.target = "/standby.img";
  r.seal = "00ff";
  r.updated_unix_ms = 1;
  const int64_t id = c->PutReplica(r).value();
  const std::optional<Replica> back = c->FindReplica("file:1:2").value();
  REQUIRE(back.has_value());
  CHECK(back->id == id);
  CHECK(back->seal == "00ff");
}
