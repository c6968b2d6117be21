// The repository commands end to end: snapshots of the reference target through the WAN and of
// local files, restores to files, devices and stdout, crashes at chosen points, damage, keys
// and locking.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/repo_cli.h"
#include "support/skip.h"
#include "support/temp_dir.h"
#include "support/testbed.h"

using namespace std::chrono_literals;
using wanbackup::testing::Json;
using wanbackup::testing::LinkScope;
using wanbackup::testing::Local;
using wanbackup::testing::Run;
using wanbackup::testing::RunOptions;
using wanbackup::testing::RunResult;
using wanbackup::testing::SameFile;
using wanbackup::testing::ScratchRepo;
using wanbackup::testing::Testbed;
using wanbackup::testing::WithPass;

namespace {

// An image with text (compressible), zeros, noise (incompressible) and an odd tail.
void MakeImage(const std::string& path, uint64_t seed, size_t chunks = 12) {
  std::ofstream out(path, std::ios::binary);
  std::string text;
  while (text.size() < (4u << 20))
    text += "the snapshot of a disk, read over a long link, seed " + std::to_string(seed) + "\n";
  text.resize(4u << 20);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t c = 0; c < chunks; ++c) {
    std::string chunk(4u << 20, '\0');
    if (c % 3 == 0) chunk = text;
    if (c % 3 == 2) {
      for (size_t i = 0; i < chunk.size(); i += sizeof x) {  // a word at a time: tests are -O0
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::memcpy(&chunk[i], &x, sizeof x);
      }
    }
    out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  }
  out.write(text.data(), 12345);
}

void Init(const ScratchRepo& s) {
  RunResult r = Local({"init", s.repo, "--json"});
  Json(r);
}

// Flips one byte in the middle of the largest pack file.
void DamagePack(const std::string& repo) {
  std::string biggest;
  uintmax_t size = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(repo + "/packs")) {
    if (e.is_regular_file() && e.file_size() > size) {
      size = e.file_size();
      biggest = e.path();
    }
  }
  REQUIRE(size > 1000);
  // The middle of the first record's payload (docs/format.md: 32-byte pack header, then the
  // record's 64-byte header with its stored size at offset 12), so the tag fails, not a header.
  std::fstream f(biggest, std::ios::in | std::ios::out | std::ios::binary);
  unsigned char stored[4];
  f.seekg(32 + 12);
  f.read(reinterpret_cast<char*>(stored), 4);
  const uint32_t payload = stored[0] | stored[1] << 8 | stored[2] << 16 | uint32_t{stored[3]} << 24;
  REQUIRE(payload > 64);
  const auto at = std::streamoff{32 + 64} + payload / 2;
  f.seekg(at);
  char c;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  f.seekp(at);
  f.write(&c, 1);
}

}  // namespace

TEST_CASE(
    "repository: LUNs read through the WAN restore bit-exact, and an unchanged LUN stores nothing",
    "[repository][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  bed.Wan("set delay=20ms");
  ScratchRepo s{"repotest"};
  Init(s);
  for (int lun : {1, 2}) {
    const std::string url =
        "iscsi://" + bed.Var("PORTAL") + "/" + bed.Var("PLAIN_IQN") + "/" + std::to_string(lun);
    const std::string prefix = "LUN" + std::to_string(lun) + "_";
    auto first = Json(bed.Wanbackup({"snapshot", url, "--repo", s.repo, "--json"}, WithPass()));
    CHECK(first["size_bytes"].get<uint64_t>() == std::stoull(bed.Var(prefix + "SIZE")));
    CHECK(first["block_size"].get<int>() == std::stoi(bed.Var(prefix + "BLOCK")));
    CHECK(first["bytes_read"].get<uint64_t>() == std::stoull(bed.Var(prefix + "SIZE")));
    CHECK(first["bytes_deallocated"].get<uint64_t>() == 0);  // not a thin LUN
    const std::string out = s.dir + "/lun" + std::to_string(lun) + ".img";
    Json(Local({"restore", std::to_string(first["snapshot"].get<int>()), "--to", out, "--repo",
                s.repo, "--json"}));
    CHECK(SameFile(out, bed.Var(prefix + "FILE")));
  }
  auto again = Json(
      bed.Wanbackup({"snapshot", "iscsi://" + bed.Var("PORTAL") + "/" + bed.Var("PLAIN_IQN") + "/1",
                     "--repo", s.repo, "--json"},
                    WithPass()));
  CHECK(again["chunks_new"].get<int>() == 0);
  CHECK(again["bytes_stored"].get<int>() == 0);
}

TEST_CASE("repository: a snapshot of a controller LUN is bad input (exit 2) and stores nothing",
          "[repository][integration]") {
  const Testbed& bed = Testbed::Get();
  ScratchRepo s{"repotest"};
  Init(s);
  const std::string url = "iscsi://" + bed.Var("PORTAL") + "/" + bed.Var("PLAIN_IQN") + "/0";
  RunResult r = bed.Wanbackup({"snapshot", url, "--repo", s.repo}, WithPass());
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("LUN 0 of " + bed.Var("PLAIN_IQN") + " is a controller, not a disk") !=
        std::string::npos);
  CHECK(Json(Local({"snapshots", "--repo", s.repo, "--json"})).empty());
}

TEST_CASE("repository: zero, compressible and incompressible data restore bit-exact and verified",
          "[repository][integration]") {
  ScratchRepo s{"repotest"};
  Init(s);
  const std::string image = s.dir + "/image.img", out = s.dir + "/out.img";
  MakeImage(image, 1);
  auto snap = Json(Local({"snapshot", image, "--repo", s.repo, "--json"}));
  CHECK(snap["chunks_zero"].get<int>() == 4);
  CHECK(snap["bytes_stored"].get<uint64_t>() < snap["bytes_new"].get<uint64_t>());
  auto restored =
      Json(Local({"restore", "latest", "--to", out, "--repo", s.repo, "--verify", "--json"}));
  CHECK(restored["verified"] == true);
  CHECK(SameFile(out, image));
  struct stat st {};
  REQUIRE(::stat(out.c_str(), &st) == 0);
  CHECK(st.st_blocks * 512 < st.st_size);  // zero chunks became holes
  CHECK((st.st_mode & 0777) == 0600);
  // And as a stream, for pipes.
  RunResult streamed = Local({"restore", "latest", "--to", "-", "--repo", s.repo, "-q"});
  REQUIRE(streamed.exit_code == 0);
  const std::string original = wanbackup::testing::FileContents(image);
  CHECK(streamed.out == original);
}

TEST_CASE(
    "repository: a SIGKILL at any point leaves earlier snapshots restorable and the next run "
    "reuses stored chunks",
    "[repository][integration]") {
  for (const char* point :
       {"snapshot.after-pack-write:2", "snapshot.before-pack-sync:2", "snapshot.after-pack-sync:2",
        "snapshot.after-commit:2", "snapshot.before-finish", "snapshot.after-finish"}) {
    INFO("killed at " << point);
    ScratchRepo s{"repotest"};
    Init(s);
    const std::string before = s.dir + "/before.img", image = s.dir + "/image.img";
    MakeImage(before, 7, 6);
    MakeImage(image, 8, 12);
    Json(Local({"snapshot", before, "--repo", s.repo, "--json"}));

    RunOptions crash = WithPass();
    crash.env["WANBACKUP_FAILPOINT"] = point;
    RunResult killed =
        Local({"snapshot", image, "--repo", s.repo, "--checkpoint-bytes", "1M"}, crash);
    CHECK(killed.exit_code == -1);  // died by the signal

    // The earlier snapshot is intact.
    Json(Local({"restore", "1", "--to", s.dir + "/before-out.img", "--repo", s.repo, "--json"}));
    CHECK(SameFile(s.dir + "/before-out.img", before));
    // The next run completes, finds what the killed run made durable, and restores bit-exact.
    auto next = Json(Local({"snapshot", image, "--repo", s.repo, "--json"}));
    const std::string p(point);
    if (p.rfind("snapshot.after-commit", 0) == 0 || p == "snapshot.before-finish") {
      CHECK(next["abandoned_runs"].get<int>() == 1);
      CHECK(next["chunks_new"].get<int>() < 8);  // some of the 8 non-zero chunks were reused
    }
    if (p == "snapshot.after-finish") CHECK(next["chunks_new"].get<int>() == 0);
    Json(
        Local({"restore", "latest", "--to", s.dir + "/image-out.img", "--repo", s.repo, "--json"}));
    CHECK(SameFile(s.dir + "/image-out.img", image));
    Json(Local({"verify", "--repo", s.repo, "--json"}));
  }
}

TEST_CASE("repository: a damaged pack is found by verify with its range, and restore refuses it",
          "[repository][integration]") {
  ScratchRepo s{"repotest"};
  Init(s);
  const std::string image = s.dir + "/image.img";
  MakeImage(image, 3);
  Json(Local({"snapshot", image, "--repo", s.repo, "--json"}));
  DamagePack(s.repo);
  RunResult verify = Local({"verify", "--repo", s.repo});
  INFO("verify: " << verify.out << verify.err);
  CHECK(verify.exit_code == 3);
  CHECK(verify.out.find("DAMAGED snapshot 1: LBA ") != std::string::npos);
  CHECK(verify.out.find("authentication failed") != std::string::npos);
  RunResult json = Local({"verify", "--repo", s.repo, "--json"});
  CHECK(json.exit_code == 3);
  auto report = nlohmann::json::parse(json.out);
  CHECK(report["ok"] == false);
  CHECK(report["damage"][0]["snapshot"] == 1);
  RunResult restore = Local({"restore", "1", "--to", s.dir + "/out.img", "--repo", s.repo});
  INFO("restore: " << restore.err);
  CHECK(restore.exit_code == 3);
  CHECK(restore.err.find("snapshot 1 bytes ") != std::string::npos);
  // The file this restore created holds part of the image: it is removed, and the line says so.
  CHECK(restore.err.find("the partial " + s.dir + "/out.img was removed") != std::string::npos);
  CHECK(::access((s.dir + "/out.img").c_str(), F_OK) != 0);
  // --force over an existing file goes through a temporary file: the old contents stay.
  std::ofstream(s.dir + "/old.img") << "keep me\n";
  RunResult forced =
      Local({"restore", "1", "--to", s.dir + "/old.img", "--force", "--repo", s.repo});
  CHECK(forced.exit_code == 3);
  std::ifstream old(s.dir + "/old.img");
  std::string text;
  std::getline(old, text);
  CHECK(text == "keep me");
}

TEST_CASE("repository: a wrong passphrase is refused and changes nothing",
          "[repository][integration]") {
  ScratchRepo s{"repotest"};
  Init(s);
  const std::string image = s.dir + "/image.img";
  MakeImage(image, 4, 3);
  Json(Local({"snapshot", image, "--repo", s.repo, "--json"}));
  struct stat before {};
  REQUIRE(::stat((s.repo + "/catalog.db").c_str(), &before) == 0);
  RunResult wrong = Local({"snapshot", image, "--repo", s.repo}, WithPass("not-it"));
  CHECK(wrong.exit_code == 5);
  CHECK(wrong.err.find("wrong passphrase") != std::string::npos);
  struct stat after {};
  REQUIRE(::stat((s.repo + "/catalog.db").c_str(), &after) == 0);
  CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec);
  CHECK(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
  CHECK(Json(Local({"snapshots", "--repo", s.repo, "--json"})).size() == 1);
}

TEST_CASE("repository: a changed passphrase or key file takes over from the old one",
          "[repository][integration]") {
  ScratchRepo s{"repotest"};
  Init(s);
  const std::string image = s.dir + "/image.img";
  MakeImage(image, 5, 3);
  Json(Local({"snapshot", image, "--repo", s.repo, "--json"}));
  RunOptions change = WithPass();
  change.env["WANBACKUP_NEW_PASSWORD"] = "second-pass";
  REQUIRE(Local({"key", "change", "--repo", s.repo}, change).exit_code == 0);
  CHECK(Local({"snapshots", "--repo", s.repo}).exit_code == 5);
  Json(Local({"restore", "1", "--to", s.dir + "/a.img", "--repo", s.repo, "--json"},
             WithPass("second-pass")));
  CHECK(SameFile(s.dir + "/a.img", image));
  const std::string key = s.dir + "/repo.key";
  REQUIRE(Local({"key", "change", "--repo", s.repo, "--new-key-file", key}, WithPass("second-pass"))
              .exit_code == 0);
  struct stat st {};
  REQUIRE(::stat(key.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  Json(Local(
      {"restore", "1", "--to", s.dir + "/b.img", "--repo", s.repo, "--key-file", key, "--json"},
      RunOptions{}));
  CHECK(SameFile(s.dir + "/b.img", image));
}

TEST_CASE("repository: key-file and unencrypted repositories work end to end",
          "[repository][integration]") {
  ScratchRepo s{"repotest"};
  const std::string image = s.dir + "/image.img";
  MakeImage(image, 6, 3);
  const std::string key = s.dir + "/new.key";
  REQUIRE(Local({"init", s.repo, "--key-file", key}, RunOptions{}).exit_code == 0);
  Json(Local({"snapshot", image, "--repo", s.repo, "--key-file", key, "--json"}, RunOptions{}));
  RunResult no_key = Local({"snapshots", "--repo", s.repo}, RunOptions{});
  CHECK(no_key.exit_code == 2);
  CHECK(no_key.err.find("--key-file") != std::string::npos);
  Json(Local({"restore", "latest", "--to", s.dir + "/k.img", "--repo", s.repo, "--key-file", key,
              "--json"},
             RunOptions{}));
  CHECK(SameFile(s.dir + "/k.img", image));

  const std::string plain = s.dir + "/plain";
  REQUIRE(Local({"init", plain, "--insecure-no-encryption"}, RunOptions{}).exit_code == 0);
  Json(Local({"snapshot", image, "--repo", plain, "--json", "--insecure-no-encryption"},
             RunOptions{}));
  Json(Local({"restore", "latest", "--to", s.dir + "/p.img", "--repo", plain, "--json",
              "--insecure-no-encryption"},
             RunOptions{}));
  CHECK(SameFile(s.dir + "/p.img", image));
  DamagePack(plain);
  // Digests still catch it.
  CHECK(Local({"verify", "--repo", plain, "--insecure-no-encryption"}, RunOptions{}).exit_code ==
        3);
}

TEST_CASE("repository: two snapshots at once: the second is refused with a clear message",
          "[repository][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  bed.Wan("set rate=100mbit");  // the first takes several seconds
  ScratchRepo s{"repotest"};
  Init(s);
  const std::string url = "iscsi://" + bed.Var("PORTAL") + "/" + bed.Var("PLAIN_IQN") + "/1";
  RunResult first;
  std::thread slow([&] {
    first = bed.Wanbackup({"snapshot", url, "--repo", s.repo, "--json"}, WithPass());
  });
  RunResult second;
  for (int i = 0; i < 40; ++i) {  // until the first holds the lock
    std::this_thread::sleep_for(250ms);
    second = Local({"snapshot", s.dir, "--repo", s.repo});
    if (second.exit_code == 7) break;
  }
  slow.join();
  CHECK(second.exit_code == 7);
  CHECK(second.err.find("is in use by wanbackup pid") != std::string::npos);
  Json(first);
  CHECK(Json(Local({"snapshots", "--repo", s.repo, "--json"})).size() == 1);
}

TEST_CASE("repository: restore to a block device checks its size and that nobody uses it",
          "[repository][integration]") {
  ScratchRepo s{"repotest"};
  Init(s);
  const std::string image = s.dir + "/image.img";
  MakeImage(image, 9, 3);  // 12 MiB + 12345 bytes
  Json(Local({"snapshot", image, "--repo", s.repo, "--json"}));
  auto attach = [](const std::string& file, const char* size) {
    Run({"truncate", "-s", size, file});
    RunResult r = Run({"losetup", "--find", "--show", file});
    std::string dev = r.out.substr(0, r.out.find('\n'));
    return r.exit_code == 0 ? dev : std::string();
  };
  const std::string big = attach(s.dir + "/big.disk", "16M");
  const std::string small = attach(s.dir + "/small.disk", "8M");
  if (big.empty() || small.empty()) {
    WB_SKIP("no loop device could be attached here (losetup --find failed)");
  }
  RunResult too_small = Local({"restore", "1", "--to", small, "--repo", s.repo});
  CHECK(too_small.exit_code == 2);
  CHECK(too_small.err.find("less than") != std::string::npos);
  {
    const int held = ::open(big.c_str(), O_RDONLY | O_EXCL);  // as a mount would
    RunResult busy = Local({"restore", "1", "--to", big, "--repo", s.repo});
    CHECK(busy.exit_code == 7);
    CHECK(busy.err.find("in use") != std::string::npos);
    ::close(held);
  }
  Json(Local({"restore", "1", "--to", big, "--repo", s.repo, "--verify", "--json"}));
  CHECK(Run({"cmp", "-n", std::to_string(12 * 1024 * 1024 + 12345), big, image}).exit_code == 0);
  Run({"losetup", "-d", big});
  Run({"losetup", "-d", small});
}

TEST_CASE(
    "repository: init and the other commands take repository and secrets from the environment",
    "[repository][integration]") {
  ScratchRepo s{"repotest"};
  const std::string image = s.dir + "/image.img";
  MakeImage(image, 7, 2);
  const std::string pass_file = s.dir + "/pass";
  std::ofstream(pass_file) << "from-a-file\n";
  std::filesystem::permissions(pass_file, std::filesystem::perms::owner_read |
                                              std::filesystem::perms::owner_write);  // a secret
  RunOptions env;
  env.env["WANBACKUP_REPO"] = s.repo;
  env.env["WANBACKUP_PASSWORD_FILE"] = pass_file;
  REQUIRE(Local({"init"}, env).exit_code == 0);
  Json(Local({"snapshot", image, "--json"}, env));
  CHECK(Local({"snapshots"}, WithPass("from-a-file")).exit_code == 2);  // no repository named
  RunOptions by_env_pass = WithPass("from-a-file");
  by_env_pass.env["WANBACKUP_REPO"] = s.repo;
  Json(Local({"restore", "latest", "--to", s.dir + "/e.img", "--json"}, by_env_pass));
  CHECK(SameFile(s.dir + "/e.img", image));

  // A key file named only by $WANBACKUP_KEY_FILE makes init create a key-file repository.
  const std::string keyed = s.dir + "/keyed";
  RunOptions key_env;
  key_env.env["WANBACKUP_KEY_FILE"] = s.dir + "/env.key";
  REQUIRE(Local({"init", keyed, "--json"}, key_env).exit_code == 0);
  CHECK(Json(Local({"snapshots", "--repo", keyed, "--json"}, key_env)).empty());
  CHECK(std::filesystem::exists(s.dir + "/env.key"));
}
