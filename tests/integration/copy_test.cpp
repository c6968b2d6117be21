// wanbackup copy against the reference target through the emulated WAN: bit-exact results,
// faults in the middle of a copy, and the errors users get.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/repo_cli.h"
#include "support/temp_dir.h"
#include "support/testbed.h"

using namespace std::chrono_literals;
using wanbackup::testing::LinkScope;
using wanbackup::testing::Run;
using wanbackup::testing::RunOptions;
using wanbackup::testing::RunResult;
using wanbackup::testing::SameBytes;
using wanbackup::testing::SameFile;
using wanbackup::testing::Testbed;

namespace {

struct OutDir : wanbackup::testing::TempDir {
  OutDir() : TempDir("copy") {}
};

std::string LunUrl(int lun) {
  const Testbed& bed = Testbed::Get();
  return "iscsi://" + bed.Var("PORTAL") + "/" + bed.Var("PLAIN_IQN") + "/" + std::to_string(lun);
}

nlohmann::json Summary(const RunResult& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

// A reference target of its own in site B (a 64 MiB LUN 1, iqn ...:NAME, its state in
// NAME-target under the testbed), on its own port, so a test can change or kill it and leave the
// shared ones alone. Stopped when the test ends, whatever it did.
class OwnTarget {
 public:
  OwnTarget(const std::string& name, int port)
      : dir_(Testbed::Get().dir + "/" + name + "-target"),
        url_("iscsi://" + Testbed::Get().addr_b + ":" + std::to_string(port) +
             "/iqn.2026-11.org.wanbackup:" + name + "/1") {
    started_ = Run({kReftarget, "start", "--dir", dir_, "--netns", Testbed::Get().netns_b,
                    "--portal", "0.0.0.0:" + std::to_string(port), "--iqn",
                    "iqn.2026-11.org.wanbackup:" + name, "--size", "64M"});
  }
  OwnTarget(const OwnTarget&) = delete;
  OwnTarget& operator=(const OwnTarget&) = delete;
  ~OwnTarget() { Run({kReftarget, "stop", "--dir", dir_}); }

  const RunResult& started() const { return started_; }
  const std::string& dir() const { return dir_; }
  const std::string& url() const { return url_; }

 private:
  static constexpr const char* kReftarget = WB_SOURCE_DIR "/scripts/reftarget";
  std::string dir_, url_;
  RunResult started_;
};

}  // namespace

TEST_CASE("copy: a 512-byte-block LUN is copied bit-exact with default settings",
          "[copy][integration]") {
  const Testbed& bed = Testbed::Get();
  OutDir out;
  const std::string file = out.path() + "/lun1.img";
  auto summary = Summary(bed.Wanbackup({"copy", LunUrl(1), file, "--json"}));
  CHECK(summary["bytes"].get<uint64_t>() == std::stoull(bed.Var("LUN1_SIZE")));
  CHECK(summary["connections"].get<int>() >= 1);  // one suffices on a LAN
  CHECK(SameFile(file, bed.Var("LUN1_FILE")));
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE(
    "copy: a 4096-byte-block LUN of odd size is bit-exact with 1 and with 4 connections at 20 ms",
    "[copy][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  bed.Wan("set delay=20ms");
  OutDir out;
  for (const char* connections : {"1", "4"}) {
    const std::string file = out.path() + "/lun2-" + connections + ".img";
    // 1 MiB READs: the LUN (40 MiB + 8 KiB) is no multiple of them.
    auto summary = Summary(bed.Wanbackup(
        {"copy", LunUrl(2), file, "--json", "--connections", connections, "--io-size", "1M"}));
    CHECK(summary["connections"].get<int>() == std::atoi(connections));
    CHECK(summary["rtt_ms"].get<double>() >= 40.0);
    CHECK(SameFile(file, bed.Var("LUN2_FILE")));
  }
}

TEST_CASE(
    "copy: every new session's UNIT ATTENTION is taken by the TEST UNIT READY sent with its "
    "first commands, none of which is sent again",
    "[copy][integration]") {
  // tgt reports a power-on to every new session's first command but INQUIRY, once. Sent again
  // each time, the LUN's description and each added connection's check cost a round trip more
  // (connection.h, ExecuteAllFirst); the trace names every command sent again.
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  bed.Wan("set delay=20ms");
  RunOptions traced;
  traced.env["WANBACKUP_TRACE"] = "1";
  // The whole LUN (64 MiB): the copy outlasts the added connections' logins.
  RunResult r = bed.Wanbackup({"copy", LunUrl(1), "/dev/null", "--connections", "4"}, traced);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto count = [&r](const std::string& what) {
    size_t n = 0;
    for (size_t at = r.err.find(what); at != std::string::npos; at = r.err.find(what, at + 1))
      ++n;
    return n;
  };
  // the connections added to the first one, each checked with READ CAPACITY
  CHECK(count("login done") == 3);
  CHECK(count("of the batch again") == 0);  // no command sent again
  // And the attention was there to take: one per session, the first and the 3 added.
  CHECK(count("taken by TEST UNIT READY") == 4);
}

TEST_CASE("copy: the paper's baseline mode reads one 128 KiB READ at a time, bit-exact",
          "[copy][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  bed.Wan("set delay=8ms");
  OutDir out;
  const std::string file = out.path() + "/baseline.img";
  auto summary = Summary(
      bed.Wanbackup({"copy", LunUrl(1), file, "--json", "--paper-baseline", "--length", "6M"}));
  CHECK(summary["connections"].get<int>() == 1);
  CHECK(summary["queue_depth"].get<int>() == 1);
  CHECK(summary["io_size"].get<int>() == 128 * 1024);
  CHECK(SameBytes(file, bed.Var("LUN1_FILE"), 6 << 20));
}

TEST_CASE("copy: to standard output the bytes come in order", "[copy][integration]") {
  const Testbed& bed = Testbed::Get();
  RunResult r = bed.Wanbackup({"copy", LunUrl(2), "-", "-q", "--connections", "3"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string original = wanbackup::testing::FileContents(bed.Var("LUN2_FILE"));
  CHECK(r.out.size() == original.size());
  CHECK(r.out == original);
}

TEST_CASE("copy: an existing destination is refused without --force and left untouched",
          "[copy][integration]") {
  const Testbed& bed = Testbed::Get();
  OutDir out;
  const std::string file = out.path() + "/keep.img";
  std::ofstream(file) << "keep me";
  RunResult r = bed.Wanbackup({"copy", LunUrl(2), file});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--force") != std::string::npos);
  std::ifstream in(file);
  std::string content;
  std::getline(in, content);
  CHECK(content == "keep me");
}

TEST_CASE("copy: CHAP with the right secret reads and a wrong one exits 5", "[copy][integration]") {
  const Testbed& bed = Testbed::Get();
  const std::string url = "iscsi://" + bed.Var("CHAP_PORTAL") + "/" + bed.Var("CHAP_IQN") + "/1";
  RunResult ok = bed.Wanbackup({"copy", url, "/dev/null", "--chap-user", bed.Var("CHAP_USER"),
                                "--chap-secret-file", bed.Var("CHAP_SECRET_FILE"), "--json"});
  CHECK(Summary(ok)["bytes"].get<uint64_t>() == 16u << 20);
  RunResult wrong = bed.Wanbackup({"copy", url, "/dev/null", "--chap-user", bed.Var("CHAP_USER"),
                                   "--chap-secret-file", bed.Var("WRONG_SECRET_FILE")});
  CHECK(wrong.exit_code == 5);
  CHECK(wrong.err.find("CHAP authentication failed") != std::string::npos);
}

TEST_CASE("copy: a CHAP LUN named with user@ is copied to an open LUN with --chap-secret-file",
          "[copy][write][integration]") {
  const Testbed& bed = Testbed::Get();
  const std::string from = "iscsi://" + bed.Var("CHAP_USER") + "@" + bed.Var("CHAP_PORTAL") + "/" +
                           bed.Var("CHAP_IQN") + "/1";
  const std::string to = "iscsi://" + bed.Var("PORTAL") + "/" + bed.Var("SCRATCH_IQN") + "/1";
  // The secret is alice's on the CHAP target; the scratch target asks for none.
  RunResult r = bed.Wanbackup(
      {"copy", from, to, "--chap-secret-file", bed.Var("CHAP_SECRET_FILE"), "--force", "--json"});
  auto summary = Summary(r);
  CHECK(summary["bytes"].get<uint64_t>() == 16u << 20);
  CHECK(summary["bytes_written"].get<uint64_t>() == 16u << 20);
}

TEST_CASE("copy: a CHAP LUN is copied to an open LUN with --source-chap-secret-file",
          "[copy][write][integration]") {
  const Testbed& bed = Testbed::Get();
  const std::string from = "iscsi://" + bed.Var("CHAP_USER") + "@" + bed.Var("CHAP_PORTAL") + "/" +
                           bed.Var("CHAP_IQN") + "/1";
  const std::string to = "iscsi://" + bed.Var("PORTAL") + "/" + bed.Var("SCRATCH_IQN") + "/1";
  RunResult r = bed.Wanbackup({"copy", from, to, "--source-chap-secret-file",
                               bed.Var("CHAP_SECRET_FILE"), "--force", "--json"});
  auto summary = Summary(r);
  CHECK(summary["bytes"].get<uint64_t>() == 16u << 20);
  CHECK(summary["bytes_written"].get<uint64_t>() == 16u << 20);
  CHECK(r.err.find("alice-secret") == std::string::npos);  // the secret is never printed
}

TEST_CASE("copy: a CHAP secret given for the wrong end fails the source's login and says so",
          "[copy][write][integration]") {
  const Testbed& bed = Testbed::Get();
  // The CHAP LUN's URL names no user; the open destination's names alice and gets the secret.
  const std::string from = "iscsi://" + bed.Var("CHAP_PORTAL") + "/" + bed.Var("CHAP_IQN") + "/1";
  const std::string to = "iscsi://" + bed.Var("CHAP_USER") + "@" + bed.Var("PORTAL") + "/" +
                         bed.Var("SCRATCH_IQN") + "/1";
  RunResult r = bed.Wanbackup(
      {"copy", from, to, "--destination-chap-secret-file", bed.Var("CHAP_SECRET_FILE"), "--force"});
  CHECK(r.exit_code == 5);
  CHECK(r.err.find("source: ") != std::string::npos);
  CHECK(r.err.find("alice-secret") == std::string::npos);
}

TEST_CASE("copy: a LUN that does not exist or is no disk is refused", "[copy][integration]") {
  const Testbed& bed = Testbed::Get();
  RunResult missing = bed.Wanbackup({"copy", LunUrl(7), "/dev/null"});
  CHECK(missing.exit_code == 6);
  CHECK(missing.err.find("LUN 7 does not exist") != std::string::npos);
  RunResult controller = bed.Wanbackup({"copy", LunUrl(0), "/dev/null"});
  CHECK(controller.exit_code == 2);  // a LUN that exists but is no disk: bad input
  CHECK(controller.err.find("not a disk") != std::string::npos);
}

TEST_CASE("copy: a host that does not answer fails after the login timeout with exit 4",
          "[copy][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  bed.Wan("blackhole 30s");
  RunResult r = bed.Wanbackup({"copy", LunUrl(1), "/dev/null", "--login-timeout", "2s"});
  CHECK(r.exit_code == 4);
  CHECK(r.err.find("no answer from " + bed.Var("PORTAL")) != std::string::npos);
}

TEST_CASE("copy: a short blackhole mid-copy is ridden out and the copy is bit-exact",
          "[copy][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  bed.Wan("set delay=10ms rate=160mbit");  // 64 MiB take about 4 s
  OutDir out;
  const std::string file = out.path() + "/blackhole.img";
  RunResult r;
  // Catch is not thread-safe: everything that may assert is done before the thread starts.
  const std::vector<std::string> args = {"copy", LunUrl(1), file, "--json"};
  std::thread copy([&] { r = bed.Wanbackup(args); });
  std::this_thread::sleep_for(1500ms);
  bed.Wan("blackhole 2s");
  copy.join();
  auto summary = Summary(r);
  // The blackhole hit the copy (it began 1.5 s in and lasted 2 s) ...
  CHECK(summary["seconds"].get<double>() >= 3.5);
  // ... and was ridden out by TCP alone: 2 s is far below the command timeout (30 s), so no
  // READ was given up on and no connection was dropped.
  CHECK(summary["retries"].get<int>() == 0);
  CHECK(summary["reconnects"].get<int>() == 0);
  CHECK(summary["bytes"].get<uint64_t>() == std::filesystem::file_size(bed.Var("LUN1_FILE")));
  CHECK(SameFile(file, bed.Var("LUN1_FILE")));
}

TEST_CASE(
    "snapshot: a stalled link is named on the plain progress line, and the snapshot then "
    "completes",
    "[snapshot][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  bed.Wan("set delay=10ms rate=160mbit");  // 64 MiB take about 4 s
  OutDir out;
  const std::string repo = out.path() + "/repo", key = out.path() + "/repo.key";
  REQUIRE(bed.Wanbackup({"init", repo, "--key-file", key}).exit_code == 0);
  RunResult r;
  const std::vector<std::string> args = {"snapshot",   LunUrl(1),    "--repo",
                                         repo,         "--key-file", key,
                                         "--progress", "plain",      "--progress-interval",
                                         "1s",         "--json"};
  std::thread snapshot([&] { r = bed.Wanbackup(args); });
  std::this_thread::sleep_for(1500ms);
  bed.Wan("blackhole 7s");
  snapshot.join();
  auto summary = Summary(r);
  CHECK(summary["size_bytes"].get<uint64_t>() == std::stoull(bed.Var("LUN1_SIZE")));
  // Progress went on while nothing arrived: the line says for how long.
  CHECK(r.err.find("stalled: no data for 5") != std::string::npos);
}

TEST_CASE(
    "copy: a blackhole longer than the command timeout forces reconnects and the copy is still "
    "bit-exact",
    "[copy][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  bed.Wan("set delay=10ms rate=160mbit");
  OutDir out;
  const std::string file = out.path() + "/reconnect.img";
  RunResult r;
  const std::vector<std::string> args = {
      "copy", LunUrl(1),         file, "--json",        "--timeout",
      "2s",   "--login-timeout", "2s", "--connections", "3"};
  std::thread copy([&] { r = bed.Wanbackup(args); });
  std::this_thread::sleep_for(1500ms);
  bed.Wan("blackhole 5s");
  copy.join();
  auto summary = Summary(r);
  CHECK(summary["reconnects"].get<int>() >= 1);
  CHECK(summary["retries"].get<int>() >= 1);
  CHECK(SameFile(file, bed.Var("LUN1_FILE")));
}

TEST_CASE(
    "copy: a reconnect that reaches another device (the LUN's serial changed) ends the copy "
    "with exit 3",
    "[copy][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  OwnTarget target("swapped", 3263);  // changing its LUN's serial leaves the shared ones alone
  INFO(target.started().err);
  REQUIRE(target.started().exit_code == 0);
  bed.Wan("set delay=10ms rate=160mbit");  // 64 MiB take about 4 s
  RunResult r;
  std::thread copy([&] {
    r = bed.Wanbackup({"copy", target.url(), "/dev/null", "--timeout", "2s", "--login-timeout",
                       "2s", "--connections", "3"});
  });
  std::this_thread::sleep_for(1500ms);
  // What a reconnect would meet if the portal now led to another device of the same size: a
  // different serial (tgt's only one of its own target, so tid 1).
  RunResult changed = Run({"env", "TGT_IPC_SOCKET=" + target.dir() + "/tgtd.sock", "tgtadm", "-C",
                           "0", "--lld", "iscsi", "--mode", "logicalunit", "--op", "update",
                           "--tid", "1", "--lun", "1", "--params", "scsi_sn=another-device"});
  bed.Wan("blackhole 5s");  // longer than --timeout: every connection must reconnect
  copy.join();
  INFO(changed.err);
  REQUIRE(changed.exit_code == 0);
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("is a different device (serial 'another-device'") != std::string::npos);
}

TEST_CASE("copy: when the target dies mid-copy it gives up with a clear error and exit 4",
          "[copy][integration]") {
  LinkScope link;
  const Testbed& bed = Testbed::Get();
  OwnTarget target("doomed", 3262);  // killing it leaves the shared ones alone
  INFO(target.started().err);
  REQUIRE(target.started().exit_code == 0);
  bed.Wan("set rate=80mbit");  // 64 MiB take about 7 s
  RunResult r;
  std::thread copy([&] {
    r = bed.Wanbackup(
        {"copy", target.url(), "/dev/null", "--retry-timeout", "3s", "--login-timeout", "2s"});
  });
  std::this_thread::sleep_for(1500ms);
  std::ifstream pidfile(target.dir() + "/tgtd.pid");
  pid_t pid = 0;
  pidfile >> pid;
  REQUIRE(pid > 0);
  ::kill(pid, SIGKILL);  // the one we started
  copy.join();
  INFO(r.err);
  CHECK(r.exit_code == 4);
  CHECK(r.err.find("giving up on iscsi://") != std::string::npos);
  CHECK(r.err.find("no progress for") != std::string::npos);
  CHECK(r.err.find("unread from LBA") != std::string::npos);
}
