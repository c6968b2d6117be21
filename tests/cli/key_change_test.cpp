// `wanbackup key change --kdf-*` end to end on a local repository: the real binary, no target.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/repo_cli.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

using wanbackup::testing::Local;
using wanbackup::testing::Run;
using wanbackup::testing::RunOptions;
using wanbackup::testing::RunResult;
using wanbackup::testing::ScratchRepo;

namespace {

nlohmann::json Kdf(const std::string& repo) {
  std::ifstream in(repo + "/config.json");
  return nlohmann::json::parse(in).at("encryption").at("kdf");
}

}  // namespace

TEST_CASE("cli: key change raises the KDF cost, keeps the passphrase and refuses to lower it",
          "[cli]") {
  ScratchRepo s{"keychange"};
  const std::string image = s.dir + "/image.img";
  {
    std::ofstream out(image, std::ios::binary);
    std::mt19937_64 rng(42);
    for (int i = 0; i < 100000; ++i) {
      const uint64_t v = rng();
      out.write(reinterpret_cast<const char*>(&v), sizeof v);
    }
  }
  REQUIRE(Local({"init", s.repo}).exit_code == 0);
  REQUIRE(Local({"snapshot", image, "--repo", s.repo}).exit_code == 0);
  const uint64_t before = Kdf(s.repo).at("memlimit").get<uint64_t>();
  const std::string salt = Kdf(s.repo).at("salt").get<std::string>();

  RunResult raise =
      Local({"key", "change", "--repo", s.repo, "--kdf-memory", "160M", "--kdf-ops", "4"});
  INFO(raise.err);
  REQUIRE(raise.exit_code == 0);
  CHECK(raise.err.find("the same passphrase") != std::string::npos);
  CHECK(Kdf(s.repo).at("memlimit").get<uint64_t>() == 160u << 20);
  CHECK(Kdf(s.repo).at("memlimit").get<uint64_t>() > before);
  CHECK(Kdf(s.repo).at("opslimit").get<uint64_t>() == 4);
  CHECK(Kdf(s.repo).at("salt").get<std::string>() != salt);

  // The same passphrase still opens it, and the snapshot restores bit-exact.
  REQUIRE(Local({"restore", "1", "--to", s.dir + "/out.img", "--repo", s.repo}).exit_code == 0);
  CHECK(Run({"cmp", image, s.dir + "/out.img"}).exit_code == 0);

  for (const std::vector<std::string>& lower : {std::vector<std::string>{"--kdf-memory", "128M"},
                                                {"--kdf-ops", "3"},
                                                {"--kdf-memory", "1T"}}) {
    std::vector<std::string> args = {"key", "change", "--repo", s.repo};
    args.insert(args.end(), lower.begin(), lower.end());
    RunResult r = Local(args);
    INFO(lower[0] << " " << lower[1] << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK((r.err.find("can only be raised") != std::string::npos ||
           r.err.find("out of range") != std::string::npos));
  }
  CHECK(Kdf(s.repo).at("memlimit").get<uint64_t>() == 160u << 20);  // nothing changed

  // A key file given to a passphrase repository: the error says which credential it takes.
  std::ofstream(s.dir + "/some.key") << "not this repository's key\n";
  RunOptions key_only;
  key_only.env = {{"WANBACKUP_KEY_FILE", s.dir + "/some.key"}};
  RunResult wrong_kind = Run({WB_WANBACKUP_BIN, "snapshots", "--repo", s.repo}, key_only);
  INFO(wrong_kind.err);
  CHECK(wrong_kind.exit_code == 2);
  CHECK(wrong_kind.err.find("is unlocked by a passphrase, not a key file") != std::string::npos);
}

TEST_CASE("cli: a passphrase set after a key file keeps the cost an earlier passphrase had",
          "[cli]") {
  ScratchRepo s{"keyround"};
  REQUIRE(Local({"init", s.repo}).exit_code == 0);
  REQUIRE(Local({"key", "change", "--repo", s.repo, "--kdf-memory", "160M", "--kdf-ops", "4"})
              .exit_code == 0);
  const std::string key = s.dir + "/repo.key";
  RunResult to_key = Local({"key", "change", "--repo", s.repo, "--new-key-file", key});
  INFO(to_key.err);
  REQUIRE(to_key.exit_code == 0);

  RunOptions by_key;
  by_key.env = {{"WANBACKUP_KEY_FILE", key}, {"WANBACKUP_NEW_PASSWORD", "a new passphrase"}};
  // Asking for less than the earlier passphrase had is refused under the key file too.
  RunResult lower =
      Run({WB_WANBACKUP_BIN, "key", "change", "--repo", s.repo, "--kdf-memory", "150M"}, by_key);
  INFO(lower.err);
  CHECK(lower.exit_code == 2);
  CHECK(lower.err.find("can only be raised") != std::string::npos);

  RunResult back = Run({WB_WANBACKUP_BIN, "key", "change", "--repo", s.repo}, by_key);
  INFO(back.err);
  REQUIRE(back.exit_code == 0);
  CHECK(back.err.find("160.00 MiB, 4 passes") != std::string::npos);
  CHECK(Kdf(s.repo).at("memlimit").get<uint64_t>() == 160u << 20);
  CHECK(Kdf(s.repo).at("opslimit").get<uint64_t>() == 4);

  RunOptions by_new;
  by_new.env = {{"WANBACKUP_PASSWORD", "a new passphrase"}};
  CHECK(Run({WB_WANBACKUP_BIN, "snapshots", "--repo", s.repo}, by_new).exit_code == 0);
}

TEST_CASE("cli: key change --help gives the KDF defaults, the rule and an example", "[cli]") {
  RunResult r = Run({WB_WANBACKUP_BIN, "key", "change", "--help"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("--kdf-memory") != std::string::npos);
  CHECK(r.out.find("128.00 MiB, 3 passes") != std::string::npos);
  CHECK(r.out.find("never lowered") != std::string::npos);
  CHECK(r.out.find("--kdf-memory 1G --kdf-ops 4") != std::string::npos);
}

TEST_CASE("cli: two key changes at once: one wins, the other says so and writes nothing", "[cli]") {
  wanbackup::testing::TempDir dir("key-race");
  wanbackup::testing::RepoCli repo(dir);
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  // Both read config.json, then wait for the writer lock this test holds.
  const int lock = ::open((repo.path() + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(lock >= 0);
  REQUIRE(::flock(lock, LOCK_EX) == 0);
  const std::string key_a = dir / "a.key", key_b = dir / "b.key";
  wanbackup::testing::RunOptions o;
  o.env = {{"WANBACKUP_REPO", repo.path()}, {"WANBACKUP_KEY_FILE", repo.key()}};
  std::vector<std::unique_ptr<wanbackup::testing::Background>> runs;
  for (const std::string& key : {key_a, key_b}) {
    runs.push_back(std::make_unique<wanbackup::testing::Background>(
        std::vector<std::string>{WB_WANBACKUP_BIN, "key", "change", "--new-key-file", key,
                                 "--lock-wait", "120s"},
        o));
  }
  // Until both wait on the lock (each has made its new key file by then, or soon after).
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ::close(lock);
  const int a = runs[0]->Wait(std::chrono::seconds(120));
  const int b = runs[1]->Wait(std::chrono::seconds(120));
  INFO("exit codes " << a << ", " << b);
  CHECK(((a == 0) != (b == 0)));
  const std::string winner = a == 0 ? key_a : key_b, loser = a == 0 ? key_b : key_a;
  CHECK(repo.Wb({"snapshots"}, "", {{"WANBACKUP_KEY_FILE", winner}}).exit_code == 0);
  CHECK(repo.Wb({"snapshots"}, "", {{"WANBACKUP_KEY_FILE", loser}}).exit_code != 0);
}
