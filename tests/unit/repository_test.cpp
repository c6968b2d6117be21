// The repository end to end through the library: snapshot, restore, dedup, verify, key change.
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <catch2/catch.hpp>

#include "pipeline/file_sink.h"
#include "pipeline/file_source.h"
#include "pipeline/restorer.h"
#include "pipeline/snapshotter.h"
#include "repository/record.h"
#include "repository/verifier.h"
#include "support/memory_block_io.h"
#include "support/temp_dir.h"

using wanbackup::Secret;
using wanbackup::StatusCode;
using namespace wanbackup::pipeline;

namespace {

struct TempRepo {
  wanbackup::testing::TempDir tmp{"repo"};
  std::string dir = tmp.path();
  std::string path = tmp / "repo";
};

InitOptions Quick(const char* passphrase) {
  InitOptions o;
  o.chunk_size = 64 << 10;
  o.credentials.passphrase = Secret(passphrase);
  o.kdf.opslimit = 1;
  o.kdf.memlimit = 8 << 20;
  return o;
}

std::unique_ptr<Repository> OpenRw(const std::string& path, const char* passphrase) {
  Credentials c;
  c.passphrase = Secret(passphrase);
  auto r = Repository::Open(path, c, OpenMode::kWrite);
  REQUIRE(r.ok());
  return std::move(r).value();
}

// 40 chunks of 64 KiB and a short tail: text, zeros, noise, and a repeat of the first chunk.
std::vector<uint8_t> Image() {
  std::vector<uint8_t> v(40 * 65536 + 777);
  const char* words = "block devices backed up over long links ";
  for (size_t i = 0; i < 16 * 65536; ++i)
    v[i] = static_cast<uint8_t>(words[i % 41]);
  uint64_t x = 7;
  for (size_t i = 24 * 65536; i < v.size(); ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = static_cast<uint8_t>(x >> 56);
  }
  std::copy(v.begin(), v.begin() + 65536, v.begin() + 30 * 65536);
  return v;
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A snapshot's map: the chunk id of every chunk in order (0 for an all-zero chunk).
std::vector<int64_t> ChunkIds(Repository& repo, int64_t snapshot) {
  std::vector<int64_t> out;
  REQUIRE(repo.catalog()
              .ForEachMapSegment(snapshot,
                                 [&out](uint64_t, const std::vector<int64_t>& ids) {
                                   out.insert(out.end(), ids.begin(), ids.end());
                                   return wanbackup::Status::Ok();
                                 })
              .ok());
  return out;
}

}  // namespace

TEST_CASE("repository: a snapshot restores bit-exact, zeros as holes", "[repository]") {
  TempRepo t;
  REQUIRE(Repository::Init(t.path, Quick("pw")).ok());
  auto repo = OpenRw(t.path, "pw");
  const auto image = Image();
  wanbackup::testing::MemorySource source(image, 1, 8, 65536);
  auto snap = TakeSnapshot(*repo, source, SnapshotOptions{});
  REQUIRE(snap.ok());
  CHECK(snap->info.chunks_total == 41);
  CHECK(snap->info.chunks_zero == 8);
  // 16 text chunks are alike in pairs at most; the repeated noise chunk is stored once.
  CHECK(snap->info.chunks_new < 41 - 8);
  auto sink = FileSink::Open(t.dir + "/out.img", FileSinkOptions{});
  REQUIRE(sink.ok());
  auto restored = RestoreSnapshot(*repo, snap->info, **sink, RestoreOptions{});
  REQUIRE(restored.ok());
  CHECK(restored->zero_bytes == 8 * 65536);
  CHECK(ReadFile(t.dir + "/out.img") == image);
  CHECK(CheckRestored(*repo, snap->info, t.dir + "/out.img").ok());
}

TEST_CASE("repository: deallocated chunks of a thin source are not read and restore as zeros",
          "[repository][thin]") {
  TempRepo t;
  REQUIRE(Repository::Init(t.path, Quick("pw")).ok());
  auto repo = OpenRw(t.path, "pw");
  const auto image = Image();  // chunks 16-23 are zeros
  // The source reports chunks 16-23 deallocated, and the second half of chunk 24 (whose
  // first half holds data: a chunk partly deallocated is read whole).
  auto partly = image;
  std::fill_n(partly.begin() + 24 * 65536 + 32768, 32768, 0);
  wanbackup::testing::MemorySource thin(partly, 1, 8, 65536);
  thin.SetDeallocated({{16 * 65536, 8 * 65536}, {24 * 65536 + 32768, 32768}});
  auto snap = TakeSnapshot(*repo, thin, SnapshotOptions{});
  REQUIRE(snap.ok());
  CHECK(snap->bytes_deallocated == 8 * 65536);
  CHECK(snap->info.bytes_read == image.size() - 8 * 65536);
  CHECK(snap->info.chunks_zero == 8);
  for (const wanbackup::ByteRange& read : thin.reads())
    CHECK((read.end() <= 16 * 65536 || read.offset >= 24 * 65536));

  // The same image read whole gives the same snapshot map: zero chunks stored alike.
  wanbackup::testing::MemorySource whole(partly, 1, 8, 65536);
  auto full = TakeSnapshot(*repo, whole, SnapshotOptions{});
  REQUIRE(full.ok());
  CHECK(full->bytes_deallocated == 0);
  CHECK(full->info.chunks_zero == 8);
  CHECK(full->info.chunks_new == 0);
  CHECK(ChunkIds(*repo, snap->info.id) == ChunkIds(*repo, full->info.id));

  auto sink = FileSink::Open(t.dir + "/out.img", FileSinkOptions{});
  REQUIRE(sink.ok());
  REQUIRE(RestoreSnapshot(*repo, snap->info, **sink, RestoreOptions{}).ok());
  CHECK(ReadFile(t.dir + "/out.img") == partly);
}

TEST_CASE("repository: a thin source that refuses GET LBA STATUS is read whole",
          "[repository][thin]") {
  TempRepo t;
  REQUIRE(Repository::Init(t.path, Quick("pw")).ok());
  auto repo = OpenRw(t.path, "pw");
  const auto image = Image();
  wanbackup::testing::MemorySource refusing(image, 1, 8, 65536);
  refusing.SetDeallocated({{16 * 65536, 8 * 65536}},
                          wanbackup::Status::Unsupported("ILLEGAL REQUEST, INVALID OPCODE"));
  auto snap = TakeSnapshot(*repo, refusing, SnapshotOptions{});
  REQUIRE(snap.ok());
  CHECK(snap->bytes_deallocated == 0);
  CHECK(snap->info.bytes_read == image.size());
  CHECK(snap->info.chunks_zero == 8);
  CHECK(refusing.deallocation_queries().size() == 1);
}

TEST_CASE("repository: a second snapshot of the same data stores nothing", "[repository]") {
  TempRepo t;
  REQUIRE(Repository::Init(t.path, Quick("pw")).ok());
  auto repo = OpenRw(t.path, "pw");
  const auto image = Image();
  wanbackup::testing::MemorySource a(image, 1), b(image, 1, 8, 65536, 9);
  REQUIRE(TakeSnapshot(*repo, a, SnapshotOptions{}).ok());
  auto second = TakeSnapshot(*repo, b, SnapshotOptions{});
  REQUIRE(second.ok());
  CHECK(second->info.chunks_new == 0);
  CHECK(second->info.bytes_stored == 0);
  CHECK(repo->catalog().Snapshots(false).value().size() == 2);
}

TEST_CASE("repository: a source that fails keeps the chunks stored so far for the next run",
          "[repository]") {
  TempRepo t;
  REQUIRE(Repository::Init(t.path, Quick("pw")).ok());
  const auto image = Image();
  {
    auto repo = OpenRw(t.path, "pw");
    wanbackup::testing::MemorySource failing(image, 1, 1, 65536);  // in order, one at a time
    failing.FailRange(35 * 65536, 1, wanbackup::Status::MediumError("unreadable"));
    SnapshotOptions o;
    o.commit_bytes = 1;  // a checkpoint after every record
    auto r = TakeSnapshot(*repo, failing, o);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kMediumError);
    CHECK(repo->catalog().Snapshots(false).value().empty());
  }
  auto repo = OpenRw(t.path, "pw");
  wanbackup::testing::MemorySource good(image, 1);
  auto r = TakeSnapshot(*repo, good, SnapshotOptions{});
  REQUIRE(r.ok());
  CHECK(r->info.chunks_new == 6);  // chunk 35, which failed, and the five after it
}

TEST_CASE("repository: verify finds a flipped byte and names the snapshot range", "[repository]") {
  TempRepo t;
  REQUIRE(Repository::Init(t.path, Quick("pw")).ok());
  auto repo = OpenRw(t.path, "pw");
  const auto image = Image();
  wanbackup::testing::MemorySource source(image, 1, 1, 65536);
  auto snap = TakeSnapshot(*repo, source, SnapshotOptions{});
  REQUIRE(snap.ok());
  CHECK(VerifyRepository(*repo, VerifyOptions{})->ok());
  // Flip one payload byte of the chunk at index 30 (the repeat of chunk 0: two ranges).
  const auto id = repo->catalog().FindChunk(repo->keys().DigestOf(image.data(), 65536)).value();
  REQUIRE(id.has_value());
  const auto chunk = repo->catalog().GetChunk(*id).value();
  const auto packs = repo->catalog().Packs().value();
  const std::string pack = repo->PackPath(packs.at(0).name);
  {
    std::fstream f(pack, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(chunk.offset + kRecordHeaderSize + 50));
    char c;
    f.read(&c, 1);
    c ^= 0x40;
    f.seekp(static_cast<std::streamoff>(chunk.offset + kRecordHeaderSize + 50));
    f.write(&c, 1);
  }
  auto report = VerifyRepository(*repo, VerifyOptions{});
  REQUIRE(report.ok());
  CHECK_FALSE(report->ok());
  CHECK(report->chunks_damaged == 1);
  REQUIRE(report->damage.size() == 2);
  CHECK(report->damage[0].offset == 0);
  CHECK(report->damage[0].length == 65536);
  CHECK(report->damage[1].offset == 30 * 65536);
  CHECK(report->damage[0].reason.find("authentication failed") != std::string::npos);
  auto sink = FileSink::Open(t.dir + "/out.img", FileSinkOptions{});
  auto restored = RestoreSnapshot(*repo, snap->info, **sink, RestoreOptions{});
  REQUIRE_FALSE(restored.ok());
  CHECK(restored.status().code() == StatusCode::kCorruption);
  CHECK(restored.status().message().find("bytes 0+65536") != std::string::npos);
}

TEST_CASE("repository: a changed passphrase opens it and the old one no longer does",
          "[repository]") {
  TempRepo t;
  REQUIRE(Repository::Init(t.path, Quick("old")).ok());
  {
    auto repo = OpenRw(t.path, "old");
    Credentials next;
    next.passphrase = Secret("new");
    REQUIRE(repo->ChangeKey(EncryptionMode::kPassphrase, next).ok());
  }
  Credentials old_c, new_c;
  old_c.passphrase = Secret("old");
  new_c.passphrase = Secret("new");
  CHECK(Repository::Open(t.path, old_c, OpenMode::kRead).status().code() ==
        StatusCode::kAuthFailed);
  CHECK(Repository::Open(t.path, new_c, OpenMode::kRead).ok());
}

TEST_CASE("repository: init refuses an existing repository and odd chunk sizes", "[repository]") {
  TempRepo t;
  REQUIRE(Repository::Init(t.path, Quick("pw")).ok());
  CHECK(Repository::Init(t.path, Quick("pw")).code() == StatusCode::kAlreadyExists);
  InitOptions odd = Quick("pw");
  odd.chunk_size = 100000;
  CHECK(Repository::Init(t.dir + "/other", odd).code() == StatusCode::kInvalidArgument);
  CHECK(Repository::Open(t.dir + "/nothing", Credentials{}, OpenMode::kRead).status().code() ==
        StatusCode::kNotFound);
}

TEST_CASE("repository: init in an existing empty directory makes it 0700, as a new one is",
          "[repository]") {
  TempRepo t;
  const std::string made = t.dir + "/mountpoint";
  REQUIRE(::mkdir(made.c_str(), 0755) == 0);
  REQUIRE(::chmod(made.c_str(), 0755) == 0);  // whatever the umask
  REQUIRE(Repository::Init(made, Quick("pw")).ok());
  struct stat st {};
  REQUIRE(::stat(made.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
}

TEST_CASE("repository: key change raises the KDF cost for the same passphrase, never lowers it",
          "[repository]") {
  TempRepo t;
  REQUIRE(Repository::Init(t.path, Quick("pw")).ok());
  KdfParams higher;
  higher.opslimit = 2;
  higher.memlimit = 16 << 20;
  {
    auto repo = OpenRw(t.path, "pw");
    Credentials same;
    same.passphrase = Secret("pw");
    KdfParams lower = higher;
    lower.memlimit = 4 << 20;
    CHECK(repo->ChangeKey(EncryptionMode::kPassphrase, same, lower).code() ==
          StatusCode::kInvalidArgument);
    REQUIRE(repo->ChangeKey(EncryptionMode::kPassphrase, same, higher).ok());
    Credentials key_file;
    key_file.key_file = t.dir + "/k";
    CHECK(repo->ChangeKey(EncryptionMode::kKeyFile, key_file, higher).code() ==
          StatusCode::kInvalidArgument);
  }
  const RepositoryConfig config = Repository::ReadConfig(t.path).value();
  CHECK(config.kdf.opslimit == 2);
  CHECK(config.kdf.memlimit == 16u << 20);
  Credentials c;
  c.passphrase = Secret("pw");
  CHECK(Repository::Open(t.path, c, OpenMode::kRead).ok());
}

TEST_CASE("repository: a config.json number that is a float, negative or too large is damage",
          "[repository]") {
  TempRepo t;
  REQUIRE(Repository::Init(t.path, Quick("pw")).ok());
  const std::vector<uint8_t> raw = ReadFile(t.path + "/config.json");
  const std::string good(raw.begin(), raw.end());
  REQUIRE(ParseRepositoryConfig(good, "config.json").ok());
  const std::pair<std::string, std::string> edits[] = {
      {"\"chunk_size\": 65536", "\"chunk_size\": 6.66667e33"},
      {"\"chunk_size\": 65536", "\"chunk_size\": 65536.0"},
      {"\"format\": ", "\"format\": -1e300, \"x\": "},
      {"\"opslimit\": 1", "\"opslimit\": -1"},
      {"\"memlimit\": 8388608", "\"memlimit\": 1.8e19"},
  };
  for (const auto& [from, to] : edits) {
    std::string text = good;
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    CAPTURE(to);
    const auto parsed = ParseRepositoryConfig(text, "config.json");
    CHECK(parsed.status().code() == StatusCode::kCorruption);
  }
}
