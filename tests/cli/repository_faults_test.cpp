// Faults while a snapshot is written (docs/durability.md): a failed fdatasync, a failed SQLite
// BEGIN or COMMIT (WANBACKUP_FAIL, common/failpoint.h). The snapshot fails with a clear error,
// the catalog stays as it was, earlier snapshots restore bit-exact, the next run succeeds.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/repo_cli.h"

using wanbackup::testing::RepoCli;
using wanbackup::testing::RunResult;
using wanbackup::testing::SameFile;
using wanbackup::testing::Scribble;
using wanbackup::testing::TempDir;
using wanbackup::testing::WriteNoiseImage;

TEST_CASE("faults: a failed write step fails the snapshot and leaves the catalog as it was",
          "[faults]") {
  // pack.fdatasync:1 is the second snapshot's first pack sync (its checkpoint after one
  // record); catalog.commit:2 its first checkpoint; catalog.begin:3 the transaction after it.
  const std::string fault =
      GENERATE("pack.fdatasync:1", "pack.fdatasync:2", "catalog.commit:2", "catalog.begin:3");
  INFO(fault);
  TempDir dir("faults");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 4);
  repo.Ok({"init", "--key-file", repo.key()});
  repo.Ok({"snapshot", dir / "a.img"});
  const std::string before = repo.Ok({"snapshots", "--json"}).out;

  WriteNoiseImage(dir / "b.img", 2, 5);
  RunResult failed = repo.Wb({"snapshot", dir / "b.img", "--checkpoint-bytes", "1"}, "",
                             {{"WANBACKUP_FAIL", fault}});
  INFO(failed.err);
  CHECK(failed.exit_code == 1);  // an I/O error, not a crash (a signal gives -1)
  CHECK(failed.err.find("error") != std::string::npos);
  CHECK(repo.Ok({"snapshots", "--json"}).out == before);
  repo.Ok({"verify"});
  repo.Ok({"restore", "1", "--to", dir / "r1.img"});
  CHECK(SameFile(dir / "r1.img", dir / "a.img"));

  repo.Ok({"snapshot", dir / "b.img"});
  CHECK(nlohmann::json::parse(repo.Ok({"snapshots", "--json"}).out).size() == 2);
  repo.Ok({"verify"});
  repo.Ok({"restore", "latest", "--to", dir / "r2.img"});
  CHECK(SameFile(dir / "r2.img", dir / "b.img"));
}
