// Golden files: every --help text and every --json shape, compared byte for byte with
// tests/cli/golden/. Monitoring parses the JSON and users read the help; a change to either
// shows up here as a diff to review. Volatile JSON values (times, rates, memory, ids made of
// the clock or randomness) are replaced by a placeholder naming their type, and the test's
// temporary directory by $TMP, so the files pin names, types and the stable values.
//
// To accept a deliberate change: scripts/update-golden (runs these tests with
// WB_UPDATE_GOLDEN=1, which rewrites the files instead of comparing), then review `git diff`.
// probe needs a target: its shapes are pinned in tests/integration/target_test.cpp.
#include <filesystem>
#include <fstream>
#include <set>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/golden.h"
#include "support/repo_cli.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

using wanbackup::testing::CheckGolden;
using wanbackup::testing::JsonShape;
using wanbackup::testing::RepoCli;
using wanbackup::testing::Run;
using wanbackup::testing::RunOptions;
using wanbackup::testing::RunResult;
using wanbackup::testing::TempDir;

namespace {

// The shape of the JSON a command printed (see support/golden.h).
std::string Shape(const RunResult& r, const std::string& tmp,
                  const std::set<std::string>& volatile_keys = {}) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  return JsonShape(r.out, tmp, volatile_keys);
}

RunResult Help(std::vector<std::string> args) {
  args.insert(args.begin(), WB_WANBACKUP_BIN);
  args.emplace_back("--help");
  RunOptions o;
  o.env["COLUMNS"] = "100";  // CLI11 does not read it; fixed anyway in case a future one does
  o.timeout = std::chrono::seconds(30);
  return Run(args, o);
}

}  // namespace

TEST_CASE("golden: every command's --help is exactly its golden text", "[cli][golden]") {
  const std::vector<std::vector<std::string>> commands = {
      {},          {"init"},  {"snapshot"},      {"snapshots"}, {"restore"},
      {"verify"},  {"key"},   {"key", "change"}, {"repair"},    {"repair", "catalog"},
      {"migrate"}, {"probe"}, {"copy"},          {"forget"},    {"prune"},
      {"run"},     {"jobs"},  {"schedule"},      {"replicate"}, {"replicas"},
      {"trust"},   {"mount"}};
  for (const auto& command : commands) {
    std::string name = "wanbackup";
    for (const std::string& word : command)
      name += "-" + word;
    RunResult r = Help(command);
    INFO(name << "\nstderr: " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CheckGolden("help/" + name + ".txt", r.out);
  }
}

TEST_CASE("golden: every local command's --json output has its golden shape", "[cli][golden]") {
  TempDir dir("golden");
  RepoCli repo(dir);
  const std::string image = dir / "image.img";
  // 8 MiB: one chunk of noise, then one of zeros (so the pack's first record is chunk 0).
  wanbackup::testing::WriteNoiseImage(image, 7, 2);

  CheckGolden("json/init.json", Shape(repo.Ok({"init", "--key-file", repo.key(), "--json"}),
                                      dir.path(), {"id"}));  // the repository id is random
  // bytes_stored counts the sealed map segment, whose zstd size depends on the keyed digest of
  // chunk 0, so on the repository's random key: it varies by a byte now and then (CI, stop 53).
  // Its range is checked instead: the chunk's record (64 + 4 MiB + 40) and a map record of at
  // most 64 + 40 + 80 bytes.
  const RunResult snapshot = repo.Ok({"snapshot", image, "--json"});
  const uint64_t stored = nlohmann::json::parse(snapshot.out)["bytes_stored"].get<uint64_t>();
  CHECK(stored > 64 + (4u << 20) + 40);
  CHECK(stored <= 64 + (4u << 20) + 40 + 64 + 40 + 80);
  CheckGolden("json/snapshot.json", Shape(snapshot, dir.path(), {"bytes_stored"}));
  CheckGolden("json/snapshots.json",
              Shape(repo.Ok({"snapshots", "--json"}), dir.path(), {"bytes_stored"}));
  CheckGolden("json/restore.json",
              Shape(repo.Ok({"restore", "1", "--to", dir / "restored.img", "--json"}), dir.path()));
  CheckGolden("json/verify.json", Shape(repo.Ok({"verify", "--json"}), dir.path()));
  CheckGolden(
      "json/replicate.json",
      Shape(repo.Ok({"replicate", "1", "--to", dir / "standby.img", "--json"}), dir.path()));
  CheckGolden("json/replicas.json", Shape(repo.Ok({"replicas", "--json"}), dir.path(),
                                          {"identity", "updated_unix_ms"}));  // device, inode
  CheckGolden("json/repair-catalog.json",
              Shape(repo.Ok({"repair", "catalog", "--json"}), dir.path()));
  // A damaged chunk: verify's report names the range (and exits 3).
  std::string pack;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(repo.path() + "/packs")) {
    if (entry.is_regular_file()) pack = entry.path();
  }
  REQUIRE(!pack.empty());
  wanbackup::testing::Scribble(pack, 4096, "damage");  // inside the first chunk's record
  RunResult damaged = repo.Wb({"verify", "--json"});
  CHECK(damaged.exit_code == 3);
  CheckGolden("json/verify-damaged.json", Shape(damaged, dir.path()));
  CheckGolden("json/copy.json",
              Shape(repo.Ok({"copy", image, dir / "copied.img", "--json"}), dir.path()));
}

TEST_CASE("golden: run, jobs, forget and prune --json have their golden shapes", "[cli][golden]") {
  TempDir dir("golden-jobs");
  RepoCli repo(dir);
  const std::string image = dir / "image.img", config = dir / "wanbackup.toml";
  wanbackup::testing::WriteNoiseImage(image, 7, 2);
  repo.Ok({"init", "--key-file", repo.key()});
  std::ofstream(config) << "[repositories.main]\npath = \"" << repo.path() << "\"\nkey_file = \""
                        << repo.key() << "\"\n[jobs.disk]\nrepository = \"main\"\nsource = \""
                        << image << "\"\nschedule = \"daily\"\nkeep_last = 1\n"
                        << "prune_interval = \"always\"\nverify_share = 1\n";
  std::filesystem::permissions(
      config, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
      std::filesystem::perm_options::replace);
  // Summaries hold durations and rates; pid and host name the machine; the sealed forget
  // record's size (and so what prune frees) varies with the time it holds.
  const std::set<std::string> machine = {"summary",          "pid",          "host",
                                         "next_run_unix_ms", "unused_after", "bytes_freed"};
  const std::set<std::string> sizes = {"bytes_freed", "unused_after", "unused_bytes",
                                       "total_bytes", "live_bytes",   "bytes_copied"};
  repo.Ok({"run", "disk", "--config", config});
  CheckGolden("json/run.json",
              Shape(repo.Ok({"run", "disk", "--config", config, "--json"}), dir.path(), machine));
  CheckGolden(
      "json/jobs.json",
      Shape(repo.Ok({"jobs", "--config", config, "--last", "1", "--json"}), dir.path(), machine));
  repo.Ok({"snapshot", image, "--tag", "extra"});
  CheckGolden(
      "json/forget.json",
      Shape(repo.Ok({"forget", "--keep-last", "1", "--group-by", "source", "--json"}), dir.path()));
  CheckGolden("json/prune.json", Shape(repo.Ok({"prune", "--json"}), dir.path(), sizes));
}
