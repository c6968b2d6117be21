// `wanbackup forget`'s series (--group-by): which snapshots the --keep-* rules are applied to
// together. A series is one disk (by identity, not by the spelling of its path) and one tag by
// default. The rules themselves: unit/retention_test; forget's crash safety: prune_test.
#include <unistd.h>

#include <set>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/repo_cli.h"

namespace wanbackup::testing {
namespace {

std::set<int64_t> WouldForget(const RepoCli& repo, std::vector<std::string> args) {
  args.insert(args.begin(), {"forget", "--keep-last", "1", "--dry-run", "--json"});
  const RunResult r = repo.Wb(args);
  INFO("exit " << r.exit_code << "\nstdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  std::set<int64_t> ids;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  for (const auto& id : out["forgotten"])
    ids.insert(id.get<int64_t>());
  return ids;
}

TEST_CASE("forget: a series is one disk and one tag, however the disk's path was spelled",
          "[forget]") {
  TempDir dir("forget-series");
  RepoCli repo(dir);
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  const std::string image = dir / "disk.img", link = dir / "link.img";
  WriteNoiseImage(image, 1, 2);
  REQUIRE(::symlink(image.c_str(), link.c_str()) == 0);
  repo.Ok({"snapshot", image, "--tag", "a"});  // 1
  repo.Ok({"snapshot", image, "--tag", "b"});  // 2
  repo.Ok({"snapshot", link, "--tag", "b"});   // 3: the same disk by another path
  // By default: (disk, a) = {1}, (disk, b) = {3, 2}.
  CHECK(WouldForget(repo, {}) == std::set<int64_t>{2});
  CHECK(WouldForget(repo, {"--group-by", "source,tag"}) == std::set<int64_t>{2});
  CHECK(WouldForget(repo, {"--group-by", "source"}) == std::set<int64_t>{1, 2});
  CHECK(WouldForget(repo, {"--group-by", "tag"}) == std::set<int64_t>{2});
  CHECK(WouldForget(repo, {"--group-by", ""}) == std::set<int64_t>{1, 2});
  CHECK(WouldForget(repo, {"--group-by", "job"}) == std::set<int64_t>{1, 2});  // none has a job
  // --source names the disk, by either path.
  CHECK(WouldForget(repo, {"--source", link, "--group-by", "source"}) == std::set<int64_t>{1, 2});
  const nlohmann::json plan =
      Json(repo.Wb({"forget", "--keep-last", "1", "--dry-run", "--json", "--group-by", "tag"}));
  REQUIRE(plan["sources"].size() == 2);
  CHECK(plan["sources"][0]["source"].is_null());
  CHECK(plan["sources"][0]["tag"] == "a");
  CHECK(plan["sources"][0]["job"].is_null());
  const RunResult text = repo.Wb({"forget", "--keep-last", "1", "--dry-run"});
  CHECK(text.out.find(image + ", tag a: keep 1, forget 0\n") != std::string::npos);
  const RunResult bad = repo.Wb({"forget", "--keep-last", "1", "--group-by", "host"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("'host' is not source, tag or job") != std::string::npos);
}

TEST_CASE("forget: a source's last snapshot needs --allow-empty-source however series are grouped",
          "[forget]") {
  TempDir dir("forget-last");
  RepoCli repo(dir);
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  const std::string a = dir / "a.img", b = dir / "b.img";
  WriteNoiseImage(a, 1, 2);
  WriteNoiseImage(b, 2, 2);
  repo.Ok({"snapshot", b});  // 1: b's only snapshot
  repo.Ok({"snapshot", a});  // 2
  repo.Ok({"snapshot", a});  // 3
  for (const char* by : {"", "tag"}) {
    INFO("--group-by '" << by << "'");
    const RunResult r = repo.Wb({"forget", "--keep-last", "1", "--group-by", by});
    CHECK(r.exit_code == 2);
    CHECK(r.err == "wanbackup: error: this would forget every snapshot of source " + b +
                       " (the newest is 1); keep one, or give --allow-empty-source; nothing was "
                       "forgotten\n");
  }
  CHECK(Json(repo.Wb({"snapshots", "--json"})).size() == 3);
  repo.Ok({"forget", "--keep-last", "1", "--group-by", "", "--allow-empty-source"});
  CHECK(Json(repo.Wb({"snapshots", "--json"})).size() == 1);
}

}  // namespace
}  // namespace wanbackup::testing
