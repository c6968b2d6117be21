// Writing LUNs through the emulated WAN: restore a snapshot to a LUN of the reference target and
// read it back bit-exact; copy a file to a LUN, also through a blackhole; a LUN too small is
// refused and left untouched; a target killed and restarted mid-write is logged into again.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/repo_cli.h"
#include "support/temp_dir.h"
#include "support/testbed.h"

using namespace std::chrono_literals;
using wanbackup::testing::Json;
using wanbackup::testing::LinkScope;
using wanbackup::testing::Run;
using wanbackup::testing::RunOptions;
using wanbackup::testing::RunResult;
using wanbackup::testing::SameBytes;
using wanbackup::testing::Testbed;

namespace {

constexpr uint64_t kImageBytes = (24u << 20) + 8192;  // 6 chunks and a tail of two 4 KiB blocks

std::string ScratchUrl(int lun) {
  const Testbed& bed = Testbed::Get();
  return "iscsi://" + bed.Var("PORTAL") + "/" + bed.Var("SCRATCH_IQN") + "/" + std::to_string(lun);
}

RunOptions Pass() {
  RunOptions o;
  o.env["WANBACKUP_PASSWORD"] = "write-test-pass";
  o.timeout = std::chrono::seconds(180);
  return o;
}

// Random 4 MiB chunks, all-zero ones (WRITE SAME) and a random tail; `seed` makes each image
// differ from the last, so a restore that wrote nothing cannot pass for one that did.
void WriteImage(const std::string& path, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::ofstream out(path, std::ios::binary);
  std::vector<uint64_t> words;
  for (uint64_t done = 0; done < kImageBytes;) {
    const uint64_t n = std::min<uint64_t>(4u << 20, kImageBytes - done);
    const bool zero = (done >> 22) % 3 == 1;
    words.assign(n / 8, 0);
    if (!zero) {
      for (uint64_t& w : words)
        w = random();
    }
    out.write(reinterpret_cast<const char*>(words.data()), static_cast<std::streamsize>(n));
    done += n;
  }
}

// Reads the first `length` bytes of a LUN back through the WAN into `path`.
void ReadBack(const std::string& url, uint64_t length, const std::string& path) {
  Json(Testbed::Get().Wanbackup(
      {"copy", url, path, "--length", std::to_string(length), "--force", "--json"}));
}

}  // namespace

TEST_CASE("restore: a snapshot written to a LUN through the WAN verifies and reads back bit-exact",
          "[restore][write][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  wanbackup::testing::TempDir tmp("writetest");
  const std::string image = tmp / "image", repo = tmp / "repo", back = tmp / "back";
  WriteImage(image, 1);
  Json(Run({WB_WANBACKUP_BIN, "init", repo, "--json"}, Pass()));
  auto snap = Json(Run({WB_WANBACKUP_BIN, "snapshot", image, "--repo", repo, "--json"}, Pass()));
  bed.Wan("set delay=10ms");
  auto restored = Json(bed.Wanbackup({"restore", std::to_string(snap["snapshot"].get<int>()),
                                      "--to", ScratchUrl(1), "--repo", repo, "--verify", "--json"},
                                     Pass()));
  WARN("restore to a LUN at 10 ms one-way: " << restored.dump());
  CHECK(restored["bytes"].get<uint64_t>() == kImageBytes);
  CHECK(restored["bytes_written"].get<uint64_t>() == kImageBytes);
  CHECK(restored["verified"].get<bool>());  // read back through the WAN, every chunk checked
  // The all-zero chunks cost no data on the wire (WRITE SAME), unless tgt refused it.
  if (!restored["write_same_refused"].get<bool>()) {
    CHECK(restored["bytes_zeroed"].get<uint64_t>() == 8u << 20);
    CHECK(restored["bytes_sent"].get<uint64_t>() == kImageBytes - (8u << 20));
  }
  ReadBack(ScratchUrl(1), kImageBytes, back);
  CHECK(SameBytes(back, image, kImageBytes));
}

TEST_CASE("copy: a file copied to a LUN reads back bit-exact", "[copy][write][integration]") {
  wanbackup::testing::TempDir tmp("writetest");
  const std::string image = tmp / "image", back = tmp / "back";
  WriteImage(image, 2);
  auto summary =
      Json(Testbed::Get().Wanbackup({"copy", image, ScratchUrl(1), "--force", "--json"}));
  CHECK(summary["bytes_written"].get<uint64_t>() == kImageBytes);  // acknowledged by the target
  if (!summary["write_same_refused"].get<bool>()) {
    // The all-zero pieces of each WRITE go as WRITE SAME: of the 8 MiB of zeros, all but the
    // pieces that straddle a zero region's edges cost no data on the wire.
    CHECK(summary["bytes_sent"].get<uint64_t>() < kImageBytes - (7u << 20));
  }
  ReadBack(ScratchUrl(1), kImageBytes, back);
  CHECK(SameBytes(back, image, kImageBytes));
}

TEST_CASE("copy: a LUN that holds data is refused without --force, and nothing is written",
          "[copy][write][integration]") {
  const Testbed& bed = Testbed::Get();
  wanbackup::testing::TempDir tmp("writetest");
  const std::string image = tmp / "image", other = tmp / "other", back = tmp / "back";
  WriteImage(image, 11);
  WriteImage(other, 12);
  Json(bed.Wanbackup({"copy", image, ScratchUrl(1), "--force", "--json"}));
  const RunResult r = bed.Wanbackup({"copy", other, ScratchUrl(1)});
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, Catch::Contains("holds data") && Catch::Contains("--force"));
  ReadBack(ScratchUrl(1), kImageBytes, back);
  CHECK(SameBytes(back, image, kImageBytes));
}

TEST_CASE("restore: a LUN smaller than the snapshot is refused in one line, nothing written",
          "[restore][write][integration]") {
  const Testbed& bed = Testbed::Get();
  wanbackup::testing::TempDir tmp("writetest");
  const std::string image = tmp / "image", repo = tmp / "repo", back = tmp / "back";
  WriteImage(image, 3);
  Json(Run({WB_WANBACKUP_BIN, "init", repo, "--json"}, Pass()));
  auto snap = Json(Run({WB_WANBACKUP_BIN, "snapshot", image, "--repo", repo, "--json"}, Pass()));
  const RunResult r = bed.Wanbackup({"restore", std::to_string(snap["snapshot"].get<int>()), "--to",
                                     ScratchUrl(2), "--repo", repo},
                                    Pass());
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, Catch::Contains("less than the image") && Catch::Contains("nothing written"));
  const uint64_t size = std::stoull(bed.Var("SCRATCH_LUN2_SIZE"));
  ReadBack(ScratchUrl(2), size, back);
  CHECK(SameBytes(back, "/dev/zero", size));  // still as created
}

TEST_CASE(
    "copy: a blackhole longer than the command timeout mid-WRITE is ridden out by "
    "reconnecting, and the LUN is bit-exact",
    "[copy][write][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  wanbackup::testing::TempDir tmp("writetest");
  const std::string image = tmp / "image", back = tmp / "back";
  WriteImage(image, 4);
  bed.Wan("set delay=10ms rate=40mbit");  // the 16 MiB of data take about 3.5 s
  RunResult r;
  // Catch is not thread-safe: everything that may assert is done before the thread starts.
  const std::vector<std::string> args = {
      "copy",      image, ScratchUrl(1),     "--json", "--force",
      "--timeout", "2s",  "--login-timeout", "2s",     "--connections",
      "3"};
  std::thread copy([&] { r = bed.Wanbackup(args); });
  std::this_thread::sleep_for(1500ms);
  bed.Wan("blackhole 5s");
  // 4 s in, the connections whose WRITEs timed out (2 s) are torn down. A socket closed the
  // plain way would linger in FIN-WAIT-1 with its unsent data and deliver it once the link is
  // back: stale WRITEs landing after newer data. Torn down with a reset, nothing lingers.
  std::this_thread::sleep_for(4s);
  const RunResult lingering =
      bed.InSiteA({"ss", "-Htn", "state", "fin-wait-1", "state", "closing", "dport", "=", ":3260"});
  copy.join();
  CHECK(lingering.exit_code == 0);
  CHECK(lingering.out.empty());
  auto summary = Json(r);
  CHECK(summary["seconds"].get<double>() >= 5.0);  // the blackhole hit the copy
  bed.Wan("set delay=0ms rate=unlimited");
  ReadBack(ScratchUrl(1), kImageBytes, back);
  CHECK(SameBytes(back, image, kImageBytes));
}

TEST_CASE("copy: --congestion-control is what the WRITE connections use, and the LUN is bit-exact",
          "[copy][write][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  wanbackup::testing::TempDir tmp("writetest");
  const std::string image = tmp / "image", back = tmp / "back";
  WriteImage(image, 5);
  bed.Wan("set delay=10ms rate=40mbit");  // the 16 MiB of data take about 3.5 s
  RunResult r;
  // Catch is not thread-safe: everything that may assert is done before the thread starts.
  const std::vector<std::string> args = {
      "copy", image, ScratchUrl(1), "--force", "--json", "--congestion-control", "reno"};
  std::thread copy([&] { r = bed.Wanbackup(args); });
  std::this_thread::sleep_for(1500ms);
  // ss gives each socket a line, then an indented one that starts with its congestion control.
  const RunResult sockets =
      bed.InSiteA({"ss", "-Htin", "state", "established", "dport", "=", ":3260"});
  copy.join();
  INFO("ss: " << sockets.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  std::vector<std::string> algorithms;
  std::istringstream lines(sockets.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || (line[0] != ' ' && line[0] != '\t')) continue;
    std::istringstream words(line);
    std::string first;
    words >> first;
    algorithms.push_back(first);
  }
  CHECK_FALSE(algorithms.empty());
  CHECK(std::all_of(algorithms.begin(), algorithms.end(),
                    [](const std::string& a) { return a == "reno"; }));
  bed.Wan("set delay=0ms rate=unlimited");
  ReadBack(ScratchUrl(1), kImageBytes, back);
  CHECK(SameBytes(back, image, kImageBytes));
}

namespace {

constexpr uint64_t kSmallChunk = 64 << 10;
constexpr uint64_t kReplicaBytes = 32u << 20;  // 512 chunks of 64 KiB

// Noise per 64 KiB chunk (chunks 100..149 zeros); chunks in [from, to) get noise from `seed`.
void WriteReplicaImage(const std::string& path, uint64_t from = 0, uint64_t to = 0,
                       uint64_t seed = 0) {
  std::vector<uint64_t> words(kReplicaBytes / 8, 0);
  for (uint64_t c = 0; c < kReplicaBytes / kSmallChunk; ++c) {
    if (c >= 100 && c < 150) continue;
    std::mt19937_64 random(c + 1 + (c >= from && c < to ? seed << 20 : 0));
    for (uint64_t i = c * kSmallChunk / 8; i < (c + 1) * kSmallChunk / 8; ++i)
      words[i] = random();
  }
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(words.data()),
             static_cast<std::streamsize>(kReplicaBytes));
}

}  // namespace

TEST_CASE(
    "replicate: a LUN through the WAN gets only the changed chunks, is repaired with --check, "
    "and a SIGKILLed run is finished by the next",
    "[replicate][write][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  wanbackup::testing::TempDir tmp("replicatetest");
  const std::string image = tmp / "image", repo = tmp / "repo", back = tmp / "back";
  const std::string lun = ScratchUrl(1);
  RunOptions pass = Pass();
  pass.env["WANBACKUP_REPO"] = repo;
  const auto snapshot = [&] { Json(Run({WB_WANBACKUP_BIN, "snapshot", image, "--json"}, pass)); };
  const auto replicate = [&](std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"replicate", "latest", "--to", lun, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Json(bed.Wanbackup(args, pass));
  };
  const auto lun_matches_image = [&] {
    ReadBack(lun, kReplicaBytes, back);
    return SameBytes(back, image, kReplicaBytes);
  };
  WriteReplicaImage(image);
  Json(Run({WB_WANBACKUP_BIN, "init", "--chunk-size", "64K", "--json"}, pass));
  snapshot();
  bed.Wan("set delay=10ms");

  // No record of the LUN: it is read and compared, whatever it held before.
  auto first = replicate();
  CHECK(first["mode"] == "check");
  CHECK(first["bytes_read"] == kReplicaBytes);
  CHECK(lun_matches_image());

  // 1 % of the chunks change: only they are written, nothing is read.
  WriteReplicaImage(image, 200, 205, 1);
  snapshot();
  auto diff = replicate();
  WARN("replicate after 1 % changed, 10 ms one-way: " << diff.dump());
  CHECK(diff["mode"] == "diff");
  CHECK(diff["chunks_written"] == 5);
  CHECK(diff["bytes_written"] == 5 * kSmallChunk);
  CHECK(diff["bytes_sent"] == 5 * kSmallChunk);
  CHECK(diff["bytes_read"] == 0);
  CHECK(lun_matches_image());

  // Changed behind wanbackup's back (1 MiB copied over its start): --check finds and repairs it.
  const std::string junk = tmp / "junk";
  WriteImage(junk, 9);  // 24 MiB of another image; its first 1 MiB is enough
  Json(bed.Wanbackup({"copy", junk, lun, "--length", "1M", "--force", "--json"}));
  auto checked = replicate({"--check"});
  CHECK(checked["mode"] == "check");
  CHECK(checked["chunks_written"] == 16);
  CHECK(lun_matches_image());

  // Killed after some WRITEs of a run that changes 105 chunks (300..399 new, 200..204 back to
  // what snapshot 1 had): the next run finishes the job.
  WriteReplicaImage(image, 300, 400, 2);
  snapshot();
  RunOptions crash = pass;
  crash.env["WANBACKUP_FAILPOINT"] = "replicate.after-write:20";
  const RunResult killed = bed.Wanbackup({"replicate", "latest", "--to", lun}, crash);
  CHECK(killed.exit_code == -1);  // died by the signal
  auto replicas = Json(Run({WB_WANBACKUP_BIN, "replicas", "--json"}, pass));
  REQUIRE(replicas.size() == 1);
  CHECK(replicas[0]["state"] == "inconsistent");
  auto finished = replicate();
  CHECK(finished["mode"] == "diff");  // the LUN's size and device id are as recorded
  CHECK(finished["chunks_written"] == 105);
  CHECK(lun_matches_image());

  // Killed again (3 -> 4), and a newer snapshot 5 arrives before the next run: it writes where
  // either 4 or 5 differs from 3... here where 3 or 4 differ from 5: 300..399 back, 450..459 new.
  WriteReplicaImage(image, 450, 460, 3);  // 4: 300..399 back to 1's, 450..459 new
  snapshot();
  crash.env["WANBACKUP_FAILPOINT"] = "replicate.after-write:30";
  CHECK(bed.Wanbackup({"replicate", "latest", "--to", lun}, crash).exit_code == -1);
  WriteReplicaImage(image, 455, 465, 4);  // 5: 455..464 new
  snapshot();
  auto union_run = replicate();
  CHECK(union_run["mode"] == "diff");
  CHECK(union_run["reason"].get<std::string>().find("interrupted") != std::string::npos);
  CHECK(union_run["chunks_written"] == 100 + 15);  // 300..399, and 450..464
  CHECK(lun_matches_image());
}

TEST_CASE("copy: 1 % packet loss both ways mid-WRITE costs time, never bytes: the LUN is bit-exact",
          "[copy][write][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  wanbackup::testing::TempDir tmp("writetest");
  const std::string image = tmp / "image", back = tmp / "back";
  WriteImage(image, 5);
  bed.Wan("set delay=10ms loss=1%");
  auto summary = Json(bed.Wanbackup({"copy", image, ScratchUrl(1), "--force", "--json"}));
  CHECK(summary["bytes"].get<uint64_t>() == kImageBytes);
  bed.Wan("set delay=0ms loss=0");
  ReadBack(ScratchUrl(1), kImageBytes, back);
  CHECK(SameBytes(back, image, kImageBytes));
}

TEST_CASE("copy: a write-protected LUN is refused in one line before anything is written",
          "[copy][write][integration]") {
  const Testbed& bed = Testbed::Get();
  wanbackup::testing::TempDir tmp("writetest");
  const std::string image = tmp / "image", back = tmp / "back";
  const std::string lun = "iscsi://" + bed.Var("PORTAL") + "/" + bed.Var("READONLY_IQN") + "/1";
  std::ofstream(image, std::ios::binary) << std::string(1 << 20, 'w');
  const RunResult r = bed.Wanbackup({"copy", image, lun, "--force"});
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, Catch::Contains("write-protected") && Catch::Contains("nothing written"));
  ReadBack(lun, 1 << 20, back);
  CHECK_FALSE(SameBytes(back, image, 1 << 20));
}

TEST_CASE("copy: a target restarted mid-WRITE is logged into again and the LUN is bit-exact",
          "[copy][write][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  wanbackup::testing::TempDir tmp("writetest");
  // A target of its own on a backing file of ours, so killing it leaves the shared ones alone
  // and the bytes it wrote can be compared directly.
  const std::string dir = bed.dir + "/restarted-target", image = tmp / "image";
  const std::string backing = tmp / "backing";
  const std::string iqn = "iqn.2026-11.org.wanbackup:restarted";
  const std::string reftarget = std::string(WB_SOURCE_DIR) + "/scripts/reftarget";
  REQUIRE(Run({"truncate", "-s", "64M", backing}).exit_code == 0);
  REQUIRE(Run({"sh", "-c", "head -c 64M /dev/urandom > '" + image + "'"}).exit_code == 0);
  const std::vector<std::string> start = {reftarget, "start",     "--dir",     dir,
                                          "--netns", bed.netns_b, "--portal",  "0.0.0.0:3264",
                                          "--iqn",   iqn,         "--backing", backing};
  RunResult started = Run(start);
  INFO(started.err);
  REQUIRE(started.exit_code == 0);
  bed.Wan("set delay=5ms rate=80mbit");  // 64 MiB take about 7 s
  RunResult r;
  const std::vector<std::string> args = {"copy",
                                         image,
                                         "iscsi://" + bed.addr_b + ":3264/" + iqn + "/1",
                                         "--force",
                                         "--json",
                                         "--timeout",
                                         "2s",
                                         "--login-timeout",
                                         "2s",
                                         "--retry-timeout",
                                         "60s"};
  std::thread copy([&] { r = bed.Wanbackup(args); });
  std::this_thread::sleep_for(1500ms);
  std::ifstream pidfile(dir + "/tgtd.pid");
  pid_t pid = 0;
  pidfile >> pid;
  if (pid > 0) ::kill(pid, SIGKILL);  // the one we started; WRITEs in flight get no status
  std::this_thread::sleep_for(2s);
  RunResult restarted = Run(start);  // same LUN, same backing file
  copy.join();
  Run({reftarget, "stop", "--dir", dir});
  REQUIRE(pid > 0);
  INFO(restarted.err);
  REQUIRE(restarted.exit_code == 0);
  auto summary = Json(r);
  CHECK(summary["write_reconnects"].get<int>() >= 1);
  CHECK(summary["bytes"].get<uint64_t>() == 64u << 20);
  CHECK(SameBytes(backing, image, 64u << 20));
}
