// `wanbackup copy` between two CHAP LUNs through the real binary: the ambiguity is refused
// before any login or secret file is read. The rules one by one: unit/copy_credentials_test.cpp.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "support/repo_cli.h"
#include "support/temp_dir.h"

namespace wanbackup::testing {
namespace {

TEST_CASE("copy cli: --chap-secret-file with a user at both ends says which flags to use",
          "[copy][cli]") {
  TempDir dir("copy-creds");
  const std::string secret = dir / "chap.secret";
  std::ofstream(secret) << "alice-secret-01\n";
  REQUIRE(::chmod(secret.c_str(), 0600) == 0);
  // Port 9 on loopback: nothing answers, so a login attempt would fail with exit 4.
  RunResult r = Local({"copy", "iscsi://alice@127.0.0.1:9/iqn.2026-11.org.example:a/1",
                       "iscsi://bob@127.0.0.1:9/iqn.2026-11.org.example:b/1", "--chap-secret-file",
                       secret, "--login-timeout", "1s"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("both URLs name a CHAP user") != std::string::npos);
  CHECK(r.err.find("--source-chap-secret-file and --destination-chap-secret-file") !=
        std::string::npos);
}

}  // namespace
}  // namespace wanbackup::testing
