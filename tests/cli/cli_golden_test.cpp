// Golden CLI tests: argv -> exit code + stderr. No target needed.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/subprocess.h"
#include "support/temp_dir.h"

using wanbackup::testing::Run;
using wanbackup::testing::RunResult;
using wanbackup::testing::TempDir;

namespace {

RunResult Wanbackup(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), WB_WANBACKUP_BIN);
  wanbackup::testing::RunOptions o;
  o.env = std::move(env);
  o.timeout = std::chrono::seconds(30);
  return Run(args, o);
}

size_t Lines(const std::string& s) {
  size_t n = 0;
  for (char c : s)
    n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("cli: --help lists the commands and the exit codes", "[cli]") {
  RunResult r = Wanbackup({"--help"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("probe") != std::string::npos);
  CHECK(r.out.find("EXIT STATUS") != std::string::npos);
  CHECK(r.out.find("130") != std::string::npos);
}

TEST_CASE("cli: --version names the program and its version", "[cli]") {
  RunResult r = Wanbackup({"--version"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("wanbackup 0.", 0) == 0);
  // ...and which library does the per-chunk crypto: OpenSSL on Debian 12 unless told otherwise.
  const char* env = std::getenv("WANBACKUP_CRYPTO");
  const bool sodium = env != nullptr && std::string(env) == "libsodium";
  CHECK(r.out.find(sodium ? "\nkeyed BLAKE2b and XChaCha20-Poly1305: libsodium 1."
                          : "\nkeyed BLAKE2b and XChaCha20-Poly1305: OpenSSL 3.") !=
        std::string::npos);
  CHECK(r.out.find("; keys and passphrases: libsodium 1.") != std::string::npos);
}

TEST_CASE("cli: probe --help documents the secret sources and an example", "[cli]") {
  RunResult r = Wanbackup({"probe", "--help"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("--chap-secret-file") != std::string::npos);
  CHECK(r.out.find("WANBACKUP_CHAP_SECRET") != std::string::npos);
  CHECK(r.out.find("EXAMPLES") != std::string::npos);
}

TEST_CASE("cli: bad input exits non-zero with one line on stderr", "[cli]") {
  struct Case {
    std::vector<std::string> args;
    int code;
    const char* says;
  };
  const std::string url = "iscsi://h/iqn.x:y/1";
  for (const Case& c :
       {Case{{}, 2, "subcommand"}, Case{{"frobnicate"}, 2, "frobnicate"},
        Case{{"probe"}, 2, "url is required"},
        Case{{"probe", "nfs://host/x"}, 2, "must start with iscsi://"},
        Case{{"probe", url, "--timeout", "soon"}, 2, "--timeout"},
        Case{{"probe", url, "--header-digest", "md5"}, 2, "md5"},
        Case{{"probe", url, "--congestion-control", "nosuchcc"}, 2, "not available"},
        Case{{"probe", url, "--chap-user", "bob"}, 2, "needs a secret"},
        Case{{"probe", url, "--chap-user", "bob", "--chap-secret-file", "/nonexistent"},
             6,
             "/nonexistent"},
        Case{{"probe", url, "--target-chap-user", "t"}, 2, "needs --chap-user"},
        Case{{"probe", url, "--connections", "33"}, 2, "--connections"},
        Case{{"probe", url, "--connections", "0"}, 2, "--connections"},
        // Caught before anything is opened: a LUN or a file named twice.
        Case{{"copy", url, url}, 2, "is the source of this copy"},
        Case{{"copy", "/nonexistent/a.img", "/nonexistent/a.img"}, 2, "is the source of this copy"},
        // Checked while parsing, also by init, which takes no lock (and creates nothing).
        Case{{"init", "--repo", "/nonexistent/wb-repo", "--lock-wait", "abc"}, 2, "--lock-wait"},
        Case{{"snapshots", "--repo", "/nonexistent/wb-repo", "--lock-wait", "5x"},
             2,
             "unknown duration unit"},
        Case{{"forget", "--repo", "/nonexistent/wb-repo", "--keep-last", "0"}, 2, "1 or more"},
        Case{{"forget", "--repo", "/nonexistent/wb-repo", "--keep-daily", "7x"}, 2, "'7x'"},
        // Before the repository is opened or the source logged in (neither is there).
        Case{{"snapshot", url, "--repo", "s3:http://127.0.0.1:9/wb-bucket", "--upload-memory",
              "lots"},
             2,
             "--upload-memory takes a size above 0"},
        Case{{"snapshot", url, "--repo", "/nonexistent/wb-repo", "--upload-memory", "0"},
             2,
             "--upload-memory takes a size above 0"},
        Case{{"snapshot", url, "--repo", "/nonexistent/wb-repo", "--upload-memory", "1M"},
             2,
             "--upload-memory is for a repository on S3"},
        Case{{"snapshot", url, "--repo", "/nonexistent/wb-repo", "--checkpoint-bytes", "4Q"},
             2,
             "4Q"}}) {
    std::string joined;
    for (const auto& a : c.args)
      joined += a + " ";
    RunResult r = Wanbackup(c.args);
    INFO("wanbackup " << joined << "\nstderr: " << r.err);
    CHECK(r.exit_code == c.code);
    CHECK(Lines(r.err) == 1);
    CHECK(r.err.rfind("wanbackup: error: ", 0) == 0);
    CHECK(r.err.find(c.says) != std::string::npos);
  }
}

TEST_CASE("cli: a failed command given --json prints a JSON document naming the error", "[cli]") {
  TempDir dir("json-failure");
  const RunResult r =
      Run({WB_WANBACKUP_BIN, "snapshots", "--repo", dir / "nothing-here", "--json"});
  CHECK(r.exit_code == 6);
  CHECK(r.err.find("no repository at") != std::string::npos);  // stderr still has the line
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["command"] == "snapshots");
  CHECK(j["exit_code"] == 6);
  CHECK(j["error"] == "no repository at " + dir / "nothing-here");
  // Without --json, stdout stays empty.
  CHECK(Run({WB_WANBACKUP_BIN, "snapshots", "--repo", dir / "nothing-here"}).out.empty());
  // When stdout carries the data (restore to "-"), the document goes to stderr, as the
  // command's own summary does: never into the image.
  const RunResult streamed = Run(
      {WB_WANBACKUP_BIN, "restore", "1", "--to", "-", "--repo", dir / "nothing-here", "--json"});
  CHECK(streamed.exit_code == 6);
  CHECK(streamed.out.empty());
  CHECK(streamed.err.find("{\"command\":\"restore\",\"error\":\"no repository at") !=
        std::string::npos);
}

TEST_CASE("cli: copy LUN to LUN takes the CHAP secret file for the end whose URL names a user",
          "[cli]") {
  // Port 9 on loopback refuses at once: getting as far as connecting is what is checked here (a
  // real copy of a CHAP LUN to an open one is in tests/integration/copy_test.cpp).
  wanbackup::testing::TempDir dir("chap");
  const std::string secret = dir / "chap.secret";
  std::ofstream(secret) << "alice-secret-01\n";
  std::filesystem::permissions(secret, std::filesystem::perms::owner_read);
  // (With user@ on the source the source's login fails first here, whatever the destination
  // does: that direction is covered through a real target in tests/integration/copy_test.cpp.)
  const std::string from = "iscsi://127.0.0.1:9/iqn.x:open/1";
  const std::string to = "iscsi://alice@127.0.0.1:9/iqn.x:chap/1";
  RunResult r = Wanbackup({"copy", from, to, "--chap-secret-file", secret});
  INFO(r.err);
  CHECK(r.exit_code == 4);
  CHECK(r.err.find("Connection refused") != std::string::npos);
  // With no user in either URL nor --chap-user the file is for nobody: refused before a login.
  RunResult nobody = Wanbackup({"copy", "iscsi://127.0.0.1:9/iqn.x:a/1",
                                "iscsi://127.0.0.1:9/iqn.x:b/1", "--chap-secret-file", secret});
  CHECK(nobody.exit_code == 2);
  CHECK(nobody.err ==
        "wanbackup: error: --chap-secret-file needs --chap-user (or user@ in the URL)\n");
}

TEST_CASE("cli: a CHAP secret in the URL works but draws a warning", "[cli]") {
  // Port 9 on loopback refuses at once, so this fails fast after the warning.
  RunResult r = Wanbackup({"probe", "iscsi://u%s3cr3t@127.0.0.1:9/iqn.x:y/1"});
  CHECK(r.exit_code == 4);
  CHECK(r.err.find("warning: the CHAP secret in the URL is visible") != std::string::npos);
  CHECK(r.err.find("s3cr3t") == std::string::npos);
  CHECK(r.err.find("Connection refused") != std::string::npos);
}
