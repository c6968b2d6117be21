// Writing LUNs through the emulated WAN: restore a snapshot to a LUN of the reference target and
// read it back bit-exact; copy a file to a LUN, also through a blackhole; a LUN too small is
// refused and left untouched.
#include <chrono>
#include <cstdint>
#include <fstream>
#include <random>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/temp_dir.h"
#include "support/testbed.h"

using namespace std::chrono_literals;
using wanbackup::testing::LinkScope;
using wanbackup::testing::Run;
using wanbackup::testing::RunOptions;
using wanbackup::testing::RunResult;
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

nlohmann::json Json(const RunResult& r) {
  INFO("exit " << r.exit_code << "\nstdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

// Reads the first `length` bytes of a LUN back through the WAN into `path`.
void ReadBack(const std::string& url, uint64_t length, const std::string& path) {
  Json(Testbed::Get().Wanbackup(
      {"copy", url, path, "--length", std::to_string(length), "--force", "--json"}));
}

bool SameBytes(const std::string& a, const std::string& b, uint64_t length) {
  return Run({"cmp", "-n", std::to_string(length), a, b}).exit_code == 0;
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
  Json(Testbed::Get().Wanbackup({"copy", image, ScratchUrl(1), "--json"}));
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
  const std::vector<std::string> args = {"copy",          image, ScratchUrl(1),     "--json",
                                         "--timeout",     "2s",  "--login-timeout", "2s",
                                         "--connections", "3"};
  std::thread copy([&] { r = bed.Wanbackup(args); });
  std::this_thread::sleep_for(1500ms);
  bed.Wan("blackhole 5s");
  copy.join();
  auto summary = Json(r);
  CHECK(summary["seconds"].get<double>() >= 5.0);  // the blackhole hit the copy
  bed.Wan("set delay=0ms rate=unlimited");
  ReadBack(ScratchUrl(1), kImageBytes, back);
  CHECK(SameBytes(back, image, kImageBytes));
}
