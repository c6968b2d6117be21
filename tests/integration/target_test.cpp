// The reference target as libiscsi's own tools and wanbackup probe see it through the WAN.
#include <algorithm>
#include <set>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/golden.h"
#include "support/testbed.h"

using wanbackup::testing::LinkScope;
using wanbackup::testing::RunOptions;
using wanbackup::testing::RunResult;
using wanbackup::testing::Testbed;

namespace {

std::string Url(const std::string& iqn, int lun = -1, const char* portal = "PORTAL") {
  const Testbed& bed = Testbed::Get();
  std::string url = "iscsi://" + bed.Var(portal) + "/" + iqn;
  if (lun >= 0) url += "/" + std::to_string(lun);
  return url;
}

}  // namespace

TEST_CASE("reftarget: iscsi-ls lists the target's LUNs through the WAN", "[target][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  bed.Wan("set delay=8ms");
  RunResult r = bed.InSiteA({"iscsi-ls", "--show-luns", "iscsi://" + bed.Var("PORTAL")});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("Target:" + bed.Var("PLAIN_IQN")) != std::string::npos);
  CHECK(r.out.find("Target:" + bed.Var("READONLY_IQN")) != std::string::npos);
  CHECK(r.out.find("Lun:1") != std::string::npos);
  CHECK(r.out.find("Lun:2") != std::string::npos);
}

TEST_CASE("reftarget: iscsi-readcapacity16 sees the asked size and block size",
          "[target][integration]") {
  const Testbed& bed = Testbed::Get();
  for (int lun : {1, 2}) {
    const std::string prefix = "LUN" + std::to_string(lun) + "_";
    RunResult r = bed.InSiteA({"iscsi-readcapacity16", Url(bed.Var("PLAIN_IQN"), lun)});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("Total size:" + bed.Var(prefix + "SIZE")) != std::string::npos);
    CHECK(r.out.find("LOGICAL BLOCK LENGTH IN BYTES:" + bed.Var(prefix + "BLOCK")) !=
          std::string::npos);
  }
}

TEST_CASE("probe: reports size and block size and negotiation of every LUN as JSON",
          "[probe][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  bed.Wan("set delay=20ms");
  RunResult r = bed.Wanbackup({"probe", Url(bed.Var("PLAIN_IQN")), "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto report = nlohmann::json::parse(r.out);
  REQUIRE(report["targets"].size() == 1);
  const auto& target = report["targets"][0];
  CHECK(target["name"] == bed.Var("PLAIN_IQN"));
  CHECK(target["login_ms"].get<double>() >= 40.0);  // several round trips of 40 ms
  CHECK(target["negotiated"]["max_burst_length"].get<int>() > 0);
  int disks = 0;
  for (const auto& lun : target["luns"]) {
    if (lun["type"] != "disk") continue;
    ++disks;
    const std::string prefix = "LUN" + std::to_string(lun["lun"].get<int>()) + "_";
    CHECK(std::to_string(lun["size_bytes"].get<uint64_t>()) == bed.Var(prefix + "SIZE"));
    CHECK(std::to_string(lun["block_size"].get<uint32_t>()) == bed.Var(prefix + "BLOCK"));
    CHECK_FALSE(lun["serial"].get<std::string>().empty());
  }
  CHECK(disks == 2);
}

TEST_CASE("golden: probe --json has its golden shape, for a LUN and for a refused discovery",
          "[probe][integration][golden]") {
  const Testbed& bed = Testbed::Get();
  // Serials and identifiers are unique to each testbed; the rate test's figures and the plan
  // it reached depend on the measured round trip.
  const std::set<std::string> measured = {"login_ms", "serial",      "identifier",
                                          "bytes",    "connections", "queue_depth",
                                          "io_size",  "plan",        "recommended_flags"};
  RunResult lun = bed.Wanbackup({"probe", Url(bed.Var("PLAIN_IQN"), 1), "--json"});
  INFO(lun.err);
  REQUIRE(lun.exit_code == 0);
  wanbackup::testing::CheckGolden("json/probe-lun.json",
                                  wanbackup::testing::JsonShape(lun.out, bed.dir, measured));
  RunResult refused = bed.Wanbackup({"probe", "iscsi://" + bed.Var("CHAP_PORTAL"), "--json"});
  CHECK(refused.exit_code == 5);
  wanbackup::testing::CheckGolden("json/probe-discovery-refused.json",
                                  wanbackup::testing::JsonShape(refused.out, bed.dir));
}

TEST_CASE("probe: the human table shows the LUN size in bytes", "[probe][integration]") {
  const Testbed& bed = Testbed::Get();
  RunResult r = bed.Wanbackup({"probe", Url(bed.Var("PLAIN_IQN"), 2)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("(" + bed.Var("LUN2_SIZE") + " B)") != std::string::npos);
  CHECK(r.out.find("MaxBurstLength=") != std::string::npos);
}

TEST_CASE("probe: discovery finds and describes every target the portal offers",
          "[probe][integration]") {
  const Testbed& bed = Testbed::Get();
  RunResult r = bed.Wanbackup({"probe", "iscsi://" + bed.Var("PORTAL"), "--json"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  const auto report = nlohmann::json::parse(r.out);
  CHECK(report["discovered"] == true);
  std::vector<std::string> names;
  for (const auto& t : report["targets"]) {
    names.push_back(t["name"]);
    CHECK_FALSE(t["luns"].empty());
    for (const auto& lun : t["luns"]) {  // MODE SENSE's WP bit, on the read-only target only
      if (lun["type"] == "disk")
        CHECK(lun["write_protected"] == (t["name"] == bed.Var("READONLY_IQN")));
    }
  }
  // The plain target, the read-only one, the scratch target restores write to, the thin one.
  CHECK(names.size() == 4);
  for (const char* key : {"PLAIN_IQN", "READONLY_IQN", "SCRATCH_IQN", "THIN_IQN"}) {
    CHECK(std::find(names.begin(), names.end(), bed.Var(key)) != names.end());
  }
}

TEST_CASE("probe: discovery reports targets it cannot log in to and exits with their reason",
          "[probe][integration]") {
  const Testbed& bed = Testbed::Get();
  RunResult r = bed.Wanbackup({"probe", "iscsi://" + bed.Var("CHAP_PORTAL"), "--json"});
  CHECK(r.exit_code == 5);  // CHAP refused, and the exit code says so
  const auto report = nlohmann::json::parse(r.out);
  REQUIRE(report["targets"].size() == 2);
  for (const auto& t : report["targets"]) {
    CHECK(t["error"].get<std::string>().find("requires CHAP") != std::string::npos);
  }
}

TEST_CASE("probe: CHAP with the right secret logs in and a wrong or missing one exits 5",
          "[probe][integration]") {
  const Testbed& bed = Testbed::Get();
  const std::string url = Url(bed.Var("CHAP_IQN"), 1, "CHAP_PORTAL");
  const std::string user = bed.Var("CHAP_USER");
  RunResult right = bed.Wanbackup(
      {"probe", url, "--chap-user", user, "--chap-secret-file", bed.Var("CHAP_SECRET_FILE")});
  INFO(right.err);
  CHECK(right.exit_code == 0);
  RunResult wrong = bed.Wanbackup(
      {"probe", url, "--chap-user", user, "--chap-secret-file", bed.Var("WRONG_SECRET_FILE")});
  CHECK(wrong.exit_code == 5);
  CHECK(wrong.err.find("CHAP authentication failed") != std::string::npos);
  RunResult missing = bed.Wanbackup({"probe", url});
  CHECK(missing.exit_code == 5);
  CHECK(missing.err.find("requires CHAP") != std::string::npos);
  RunOptions env;
  env.env["WANBACKUP_CHAP_SECRET"] = "alice-secret-01";
  RunResult from_env = bed.Wanbackup({"probe", "iscsi://" + user + "@" + url.substr(8)}, env);
  INFO(from_env.err);
  CHECK(from_env.exit_code == 0);
}

TEST_CASE("probe: mutual CHAP checks the target's secret too", "[probe][integration]") {
  const Testbed& bed = Testbed::Get();
  const std::vector<std::string> base = {"probe",
                                         Url(bed.Var("MUTUAL_IQN"), 1, "CHAP_PORTAL"),
                                         "--chap-user",
                                         bed.Var("MUTUAL_USER"),
                                         "--chap-secret-file",
                                         bed.Var("CHAP_SECRET_FILE"),
                                         "--target-chap-user",
                                         bed.Var("MUTUAL_TARGET_USER"),
                                         "--target-chap-secret-file"};
  std::vector<std::string> right = base;
  right.push_back(bed.Var("MUTUAL_TARGET_SECRET_FILE"));
  RunResult ok = bed.Wanbackup(right);
  INFO(ok.err);
  CHECK(ok.exit_code == 0);
  std::vector<std::string> wrong = base;
  wrong.push_back(bed.Var("WRONG_SECRET_FILE"));
  RunResult bad = bed.Wanbackup(wrong);
  CHECK(bad.exit_code == 5);
}

TEST_CASE("probe: --header-digest crc32c refused by the target fails the login, and auto logs in",
          "[probe][integration]") {
  const Testbed& bed = Testbed::Get();
  const std::string url = Url(bed.Var("PLAIN_IQN"), 1);
  // tgt answers None to a CRC32C offer; libiscsi would carry on without a digest.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"probe", url, "--header-digest", "crc32c"},
        std::vector<std::string>{"copy", url, "/dev/null", "--header-digest", "crc32c"}}) {
    RunResult refused = bed.Wanbackup(args);
    INFO(args[0] << ": " << refused.err);
    CHECK(refused.exit_code == 1);
    CHECK(refused.err.find(" with CRC32C header digests: the target refused them (it answered "
                           "HeaderDigest=None); --header-digest auto accepts that") !=
          std::string::npos);
    CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);
  }
  RunResult automatic = bed.Wanbackup({"probe", url, "--header-digest", "auto"});
  INFO(automatic.err);
  CHECK(automatic.exit_code == 0);
  CHECK(automatic.out.find("HeaderDigest=None") != std::string::npos);
}

TEST_CASE("probe: a LUN or target that does not exist exits 6", "[probe][integration]") {
  const Testbed& bed = Testbed::Get();
  RunResult no_lun = bed.Wanbackup({"probe", Url(bed.Var("PLAIN_IQN"), 9)});
  CHECK(no_lun.exit_code == 6);
  CHECK(no_lun.err.find("LUN 9 does not exist") != std::string::npos);
  RunResult no_target = bed.Wanbackup({"probe", Url("iqn.2026-11.org.wanbackup:nosuch", 1)});
  CHECK(no_target.exit_code == 6);
  CHECK(no_target.err.find("no such target") != std::string::npos);
}

TEST_CASE("probe: a host that does not answer times out with a clear error (exit 4)",
          "[probe][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  bed.Wan("blackhole 30s");
  RunResult r = bed.Wanbackup({"probe", Url(bed.Var("PLAIN_IQN"), 1), "--login-timeout", "2s"});
  CHECK(r.exit_code == 4);
  CHECK(r.err.find("no answer from " + bed.Var("PORTAL") + " within 2000 ms") != std::string::npos);
}
