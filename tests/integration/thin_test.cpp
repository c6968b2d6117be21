// Thin LUNs through the emulated WAN: the reference target's thin LUN (tests/testbed.sh: 100 MiB,
// data in 20 % of it, the rest holes of its sparse backing file that tgt reports deallocated
// through GET LBA STATUS). probe shows it thin and how much is mapped; snapshot and copy read
// only what is mapped and give back the LUN bit-exact; a LUN that is not thin is read whole.
#include <cstdint>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/repo_cli.h"
#include "support/temp_dir.h"
#include "support/testbed.h"

using wanbackup::testing::Json;
using wanbackup::testing::LinkScope;
using wanbackup::testing::Local;
using wanbackup::testing::SameFile;
using wanbackup::testing::Testbed;
using wanbackup::testing::WithPass;

namespace {

constexpr uint64_t kChunk = 4u << 20;

std::string ThinUrl() {
  const Testbed& bed = Testbed::Get();
  return "iscsi://" + bed.Var("PORTAL") + "/" + bed.Var("THIN_IQN") + "/1";
}

std::string PlainUrl() {
  const Testbed& bed = Testbed::Get();
  return "iscsi://" + bed.Var("PORTAL") + "/" + bed.Var("PLAIN_IQN") + "/1";
}

uint64_t Var(const std::string& key) {
  return std::stoull(Testbed::Get().Var(key));
}

}  // namespace

TEST_CASE("thin: probe shows the LUN thin, reading deallocated blocks as zeros, and what is mapped",
          "[thin][probe][integration]") {
  const Testbed& bed = Testbed::Get();
  auto report = Json(bed.Wanbackup({"probe", ThinUrl(), "--json", "--rate-test", "0"}));
  const auto& lun = report["targets"][0]["luns"][0];
  INFO(lun.dump(2));
  CHECK(lun["thin_provisioned"] == true);
  CHECK(lun["unmapped_reads_zero"] == true);
  CHECK(lun["mapped_bytes"].get<uint64_t>() == Var("THIN_DATA_BYTES"));
  CHECK(lun["provisioning_page"]["provisioning_type"] == "thin");
  CHECK(lun["provisioning_page"]["write_same_unmap"] == true);
  CHECK(lun["provisioning_page"]["unmapped_reads_zero"] == true);

  auto plain = Json(bed.Wanbackup({"probe", PlainUrl(), "--json", "--rate-test", "0"}));
  const auto& full = plain["targets"][0]["luns"][0];
  CHECK(full["thin_provisioned"] == false);
  CHECK(full["mapped_bytes"].is_null());
  CHECK(full["provisioning_page"]["provisioning_type"] == "full");

  auto table = bed.Wanbackup({"probe", ThinUrl(), "--rate-test", "0"});
  REQUIRE(table.exit_code == 0);
  CHECK(table.out.find("provisioning: thin, deallocated reads zero, mapped 20.06 MiB") !=
        std::string::npos);
}

TEST_CASE(
    "thin: a snapshot of an 80 % deallocated LUN reads a quarter of it and restores bit-exact",
    "[thin][snapshot][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  bed.Wan("set delay=20ms");
  wanbackup::testing::TempDir tmp("thintest");
  const std::string repo = tmp / "repo";
  Json(Local({"init", repo, "--json"}));
  auto snap = Json(bed.Wanbackup({"snapshot", ThinUrl(), "--repo", repo, "--json"}, WithPass()));
  INFO(snap.dump());
  const uint64_t size = Var("THIN_SIZE");
  REQUIRE(snap["size_bytes"].get<uint64_t>() == size);
  // Six chunks hold data (one of them only 64 KiB); the other 19 were never read.
  CHECK(snap["bytes_read"].get<uint64_t>() == 6 * kChunk);
  CHECK(snap["bytes_deallocated"].get<uint64_t>() == 19 * kChunk);
  CHECK(snap["bytes_read"].get<uint64_t>() * 4 <= size);
  CHECK(snap["chunks_zero"].get<uint64_t>() == 19);

  const std::string out = tmp / "thin.img";
  Json(Local({"restore", std::to_string(snap["snapshot"].get<int>()), "--to", out, "--repo", repo,
              "--json"}));
  CHECK(SameFile(out, bed.Var("THIN_FILE")));
}

TEST_CASE("thin: copy reads only the mapped bytes of a thin LUN and copies it bit-exact",
          "[thin][copy][integration]") {
  const Testbed& bed = Testbed::Get();
  wanbackup::testing::TempDir tmp("thintest");
  const std::string out = tmp / "thin.img";
  auto copy = Json(bed.Wanbackup({"copy", ThinUrl(), out, "--json"}));
  INFO(copy.dump());
  const uint64_t size = Var("THIN_SIZE");
  CHECK(copy["bytes"].get<uint64_t>() == size);
  CHECK(copy["bytes_read"].get<uint64_t>() == Var("THIN_DATA_BYTES"));
  CHECK(copy["bytes_deallocated"].get<uint64_t>() == size - Var("THIN_DATA_BYTES"));
  CHECK(SameFile(out, bed.Var("THIN_FILE")));
}

TEST_CASE("thin: a LUN that is not thin is read whole and reports nothing deallocated",
          "[thin][copy][integration]") {
  const Testbed& bed = Testbed::Get();
  wanbackup::testing::TempDir tmp("thintest");
  const std::string out = tmp / "plain.img";
  auto copy = Json(bed.Wanbackup({"copy", PlainUrl(), out, "--json"}));
  CHECK(copy["bytes_read"].get<uint64_t>() == Var("LUN1_SIZE"));
  CHECK(copy["bytes_deallocated"].get<uint64_t>() == 0);
  CHECK(SameFile(out, bed.Var("LUN1_FILE")));
}
