// Faults during a snapshot, injected with WANBACKUP_FAIL (common/failpoint.h): a
// failed pack fdatasync and a failed catalog BEGIN or COMMIT end the run with a clean error,
// commit nothing that depends on them, and leave the repository as the last good run left it.
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/repo_cli.h"
#include "support/temp_dir.h"
#include "support/testbed.h"

using wanbackup::testing::Json;
using wanbackup::testing::Local;
using wanbackup::testing::Run;
using wanbackup::testing::RunOptions;
using wanbackup::testing::RunResult;
using wanbackup::testing::SameFile;
using wanbackup::testing::ScratchRepo;

namespace {

// `chunks` 4 MiB chunks of noise (incompressible, all distinct) and every third one zero.
// Made a 64-bit word at a time: the tests build at -O0, and byte by byte under ASan took seconds.
void MakeNoiseImage(const std::string& path, uint64_t seed, size_t chunks) {
  std::ofstream out(path, std::ios::binary);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  std::vector<uint64_t> chunk((4u << 20) / sizeof(uint64_t));
  for (size_t c = 0; c < chunks; ++c) {
    for (uint64_t& word : chunk) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      word = c % 3 == 1 ? 0 : x;
    }
    out.write(reinterpret_cast<const char*>(chunk.data()),
              static_cast<std::streamsize>(chunk.size() * sizeof(uint64_t)));
  }
}

// These tests unlock with a key file next to the repository: with a passphrase every command
// ran Argon2 (about half a second each, dozens per test).
RunOptions Keyed(const std::string& repo) {
  RunOptions o;
  o.env["WANBACKUP_KEY_FILE"] = repo + ".key";
  o.timeout = std::chrono::seconds(120);
  return o;
}

// A failed run: a clean error (exit 1, not a signal or a sanitizer report), one line saying why.
void CheckCleanFailure(const RunResult& r) {
  INFO("exit " << r.exit_code << "\nstdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("runtime error") == std::string::npos);
  CHECK(r.err.find("Sanitizer") == std::string::npos);
  CHECK_FALSE(r.err.empty());
}

// A small tmpfs at `path`, unmounted (and its directory removed) however the test ends.
struct Tmpfs {
  Tmpfs(std::string at, const std::string& size) : path(std::move(at)) {
    REQUIRE(::mkdir(path.c_str(), 0700) == 0);
    REQUIRE(::mount("tmpfs", path.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0);
  }
  ~Tmpfs() {
    ::umount2(path.c_str(), MNT_DETACH);
    ::rmdir(path.c_str());
  }
  bool Remount(const std::string& options) {
    return ::mount("tmpfs", path.c_str(), "tmpfs", MS_REMOUNT | (options == "ro" ? MS_RDONLY : 0),
                   options == "ro" ? nullptr : options.c_str()) == 0;
  }
  std::string path;
};

}  // namespace

TEST_CASE(
    "fault: a failed pack fdatasync fails the snapshot, commits none of its chunks, and the "
    "next run succeeds",
    "[fault][integration]") {
  for (const char* point : {"pack.fdatasync:1", "pack.fdatasync:2", "pack.fdatasync:4"}) {
    INFO("failing " << point);
    ScratchRepo s{"faulttest"};
    Json(Local({"init", s.repo, "--key-file", s.repo + ".key", "--json"}, Keyed(s.repo)));
    const std::string before = s.dir + "/before.img", image = s.dir + "/image.img";
    MakeNoiseImage(before, 1, 4);
    MakeNoiseImage(image, 2, 9);
    Json(Local({"snapshot", before, "--repo", s.repo, "--json"}, Keyed(s.repo)));
    const std::string listed = Local({"snapshots", "--repo", s.repo, "--json"}, Keyed(s.repo)).out;

    RunOptions fail = Keyed(s.repo);
    fail.env["WANBACKUP_FAIL"] = point;
    CheckCleanFailure(
        Local({"snapshot", image, "--repo", s.repo, "--checkpoint-bytes", "1M", "-q"}, fail));

    CHECK(Local({"snapshots", "--repo", s.repo, "--json"}, Keyed(s.repo)).out == listed);
    Json(Local({"verify", "--repo", s.repo, "--json"}, Keyed(s.repo)));
    Json(Local({"restore", "1", "--to", s.dir + "/before-out.img", "--repo", s.repo, "--json"},
               Keyed(s.repo)));
    CHECK(SameFile(s.dir + "/before-out.img", before));

    auto next = Json(Local({"snapshot", image, "--repo", s.repo, "--json"}, Keyed(s.repo)));
    if (std::string(point) == "pack.fdatasync:1") {
      // The first sync failed: no chunk of the failed run was committed (a retried sync that
      // "succeeded" would have committed some), so the next run stores all 6 again.
      CHECK(next["chunks_new"].get<int>() == 6);
    }
    Json(Local({"restore", "latest", "--to", s.dir + "/out.img", "--repo", s.repo, "--json"},
               Keyed(s.repo)));
    CHECK(SameFile(s.dir + "/out.img", image));
    Json(Local({"verify", "--repo", s.repo, "--json"}, Keyed(s.repo)));
  }
}

TEST_CASE("fault: a failed catalog BEGIN or COMMIT ends the snapshot with a clean error",
          "[fault][integration]") {
  for (const char* point : {"catalog.begin:1", "catalog.begin:2", "catalog.begin:3",
                            "catalog.commit:1", "catalog.commit:2", "catalog.commit:3"}) {
    INFO("failing " << point);
    ScratchRepo s{"faulttest"};
    Json(Local({"init", s.repo, "--key-file", s.repo + ".key", "--json"}, Keyed(s.repo)));
    const std::string before = s.dir + "/before.img", image = s.dir + "/image.img";
    MakeNoiseImage(before, 3, 4);
    MakeNoiseImage(image, 4, 9);
    Json(Local({"snapshot", before, "--repo", s.repo, "--json"}, Keyed(s.repo)));
    const std::string listed = Local({"snapshots", "--repo", s.repo, "--json"}, Keyed(s.repo)).out;

    RunOptions fail = Keyed(s.repo);
    fail.env["WANBACKUP_FAIL"] = point;
    CheckCleanFailure(
        Local({"snapshot", image, "--repo", s.repo, "--checkpoint-bytes", "1M", "-q"}, fail));

    CHECK(Local({"snapshots", "--repo", s.repo, "--json"}, Keyed(s.repo)).out == listed);
    Json(Local({"restore", "1", "--to", s.dir + "/before-out.img", "--repo", s.repo, "--json"},
               Keyed(s.repo)));
    CHECK(SameFile(s.dir + "/before-out.img", before));
    Json(Local({"snapshot", image, "--repo", s.repo, "--json"}, Keyed(s.repo)));
    Json(Local({"restore", "latest", "--to", s.dir + "/out.img", "--repo", s.repo, "--json"},
               Keyed(s.repo)));
    CHECK(SameFile(s.dir + "/out.img", image));
    Json(Local({"verify", "--repo", s.repo, "--json"}, Keyed(s.repo)));
  }
}

TEST_CASE(
    "fault: a full disk fails the snapshot clearly, and after space is freed the next "
    "run succeeds",
    "[fault][integration]") {
  ScratchRepo s{"faulttest"};
  Tmpfs disk(s.dir + "/disk", "24M");
  const std::string repo = disk.path + "/repo";
  Json(Local({"init", repo, "--key-file", repo + ".key", "--json"}, Keyed(repo)));
  const std::string before = s.dir + "/before.img", image = s.dir + "/image.img";
  MakeNoiseImage(before, 5, 4);  // 12 MiB of noise: fits
  MakeNoiseImage(image, 6, 9);   // 24 MiB more: does not
  Json(Local({"snapshot", before, "--repo", repo, "--json"}, Keyed(repo)));
  const std::string listed = Local({"snapshots", "--repo", repo, "--json"}, Keyed(repo)).out;

  RunResult full =
      Local({"snapshot", image, "--repo", repo, "--checkpoint-bytes", "1M", "-q"}, Keyed(repo));
  CheckCleanFailure(full);
  CHECK(full.err.find("No space left on device") != std::string::npos);

  CHECK(Local({"snapshots", "--repo", repo, "--json"}, Keyed(repo)).out == listed);
  Json(Local({"verify", "--repo", repo, "--json"}, Keyed(repo)));
  Json(Local({"restore", "1", "--to", s.dir + "/before-out.img", "--repo", repo, "--json"},
             Keyed(repo)));
  CHECK(SameFile(s.dir + "/before-out.img", before));

  REQUIRE(disk.Remount("size=96M"));
  Json(Local({"snapshot", image, "--repo", repo, "--json"}, Keyed(repo)));
  Json(Local({"restore", "latest", "--to", s.dir + "/out.img", "--repo", repo, "--json"},
             Keyed(repo)));
  CHECK(SameFile(s.dir + "/out.img", image));
  Json(Local({"verify", "--repo", repo, "--json"}, Keyed(repo)));
}

TEST_CASE(
    "fault: a read-only repository refuses a snapshot with one clear line and changes "
    "nothing",
    "[fault][integration]") {
  ScratchRepo s{"faulttest"};
  Tmpfs disk(s.dir + "/disk", "64M");
  const std::string repo = disk.path + "/repo";
  Json(Local({"init", repo, "--key-file", repo + ".key", "--json"}, Keyed(repo)));
  const std::string before = s.dir + "/before.img", image = s.dir + "/image.img";
  MakeNoiseImage(before, 7, 4);
  MakeNoiseImage(image, 8, 6);
  Json(Local({"snapshot", before, "--repo", repo, "--json"}, Keyed(repo)));
  const std::string listed = Local({"snapshots", "--repo", repo, "--json"}, Keyed(repo)).out;
  const std::string files =
      Run({"sh", "-c", "cd " + repo + " && ls -lR --time-style=full-iso"}).out;

  REQUIRE(disk.Remount("ro"));
  RunResult refused = Local({"snapshot", image, "--repo", repo, "-q"}, Keyed(repo));
  INFO("exit " << refused.exit_code << "\nstderr: " << refused.err);
  CHECK(refused.exit_code > 0);
  CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);
  // Refused before anything is tried: the repository's directory cannot be written.
  CHECK(refused.exit_code == 5);
  CHECK(refused.err.find("is read-only; snapshot needs to write to it") != std::string::npos);

  REQUIRE(disk.Remount("rw"));
  CHECK(Run({"sh", "-c", "cd " + repo + " && ls -lR --time-style=full-iso"}).out == files);
  CHECK(Local({"snapshots", "--repo", repo, "--json"}, Keyed(repo)).out == listed);
  Json(Local({"verify", "--repo", repo, "--json"}, Keyed(repo)));
}

namespace {

// A repository in `s` with one snapshot of `image` (noise), and an older file at `out` that a
// restore --force would replace.
void OneSnapshotAndAnOldFile(const ScratchRepo& s, const std::string& image,
                             const std::string& out) {
  Json(Local({"init", s.repo, "--key-file", s.repo + ".key", "--json"}, Keyed(s.repo)));
  MakeNoiseImage(image, 9, 3);
  Json(Local({"snapshot", image, "--repo", s.repo, "--json"}, Keyed(s.repo)));
  std::ofstream(out) << "the old file";
}

}  // namespace

TEST_CASE(
    "fault: the temporary a SIGKILLed restore --force left is removed by the next one, a running "
    "one's is not",
    "[fault][integration]") {
  ScratchRepo s{"staletemp"};
  const std::string image = s.dir + "/image.img", out = s.dir + "/out.img";
  OneSnapshotAndAnOldFile(s, image, out);
  const pid_t gone = ::fork();  // a process id that no process has now
  if (gone == 0) ::_exit(0);
  REQUIRE(gone > 0);
  REQUIRE(::waitpid(gone, nullptr, 0) == gone);
  const std::string stale = s.dir + "/.wanbackup-restore-" + std::to_string(gone) + "-AbCdEf";
  const std::string running =
      s.dir + "/.wanbackup-restore-" + std::to_string(::getpid()) + "-GhIjKl";
  const std::string older = s.dir + "/.wanbackup-restore-MnOpQr";  // no process id: not ours
  for (const std::string& f : {stale, running, older})
    std::ofstream(f) << "a half-written disk";
  Json(Local({"restore", "1", "--to", out, "--repo", s.repo, "--force", "--json"}, Keyed(s.repo)));
  CHECK(SameFile(out, image));
  CHECK_FALSE(std::filesystem::exists(stale));
  CHECK(std::filesystem::exists(running));
  CHECK(std::filesystem::exists(older));
}

TEST_CASE(
    "fault: restore keeps an existing file unless forced, and a failed --force leaves it "
    "intact",
    "[fault][integration]") {
  ScratchRepo s{"faulttest"};
  const std::string image = s.dir + "/image.img", out = s.dir + "/out.img";
  OneSnapshotAndAnOldFile(s, image, out);
  std::ofstream(s.dir + "/old.copy") << "the old file";

  RunResult refused = Local({"restore", "1", "--to", out, "--repo", s.repo}, Keyed(s.repo));
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("--force") != std::string::npos);
  CHECK(SameFile(out, s.dir + "/old.copy"));

  RunOptions fail = Keyed(s.repo);
  fail.env["WANBACKUP_FAIL"] = "restore.before-rename";
  CheckCleanFailure(Local({"restore", "1", "--to", out, "--repo", s.repo, "--force"}, fail));
  CHECK(SameFile(out, s.dir + "/old.copy"));
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(s.dir))
    ++entries;
  CHECK(entries == 5);  // repo, repo.key, image, out, old.copy: no temporary file left behind

  Json(Local({"restore", "1", "--to", out, "--repo", s.repo, "--force", "--verify", "--json"},
             Keyed(s.repo)));
  CHECK(SameFile(out, image));
}
