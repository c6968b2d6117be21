// Which CHAP secret goes to which end of `wanbackup copy` (cli/copy_credentials.h).
#include "cli/copy_credentials.h"

#include <catch2/catch.hpp>

namespace wanbackup::cli {
namespace {

const std::string kAliceLun = "iscsi://alice@san:3261/iqn.2026-11.org.example:chap/1";
const std::string kBobLun = "iscsi://bob@dr-san/iqn.2026-11.org.example:dr/1";
const std::string kOpenLun = "iscsi://dr-san/iqn.2026-11.org.example:open/1";

CopyCredentialFlags PerEnd(const std::string& source_file, const std::string& destination_file) {
  CopyCredentialFlags flags;
  flags.source_chap_secret_file = source_file;
  flags.destination_chap_secret_file = destination_file;
  return flags;
}

TEST_CASE("copy credentials: each end gets the secret file named for it", "[copy][chap]") {
  Result<CopyEndFlags> ends =
      ResolveCopyCredentials(kAliceLun, kBobLun, PerEnd("/etc/alice.secret", "/etc/bob.secret"));
  REQUIRE(ends.ok());
  CHECK(ends->source.chap_secret_file == "/etc/alice.secret");
  CHECK(ends->destination.chap_secret_file == "/etc/bob.secret");
}

TEST_CASE("copy credentials: a source secret leaves an open destination without CHAP",
          "[copy][chap]") {
  Result<CopyEndFlags> ends = ResolveCopyCredentials(kAliceLun, kOpenLun, PerEnd("/s", ""));
  REQUIRE(ends.ok());
  CHECK(ends->source.chap_secret_file == "/s");
  CHECK(ends->destination.chap_secret_file.empty());
}

TEST_CASE("copy credentials: a per-end secret for an end whose URL names no user is refused",
          "[copy][chap]") {
  Result<CopyEndFlags> ends = ResolveCopyCredentials(kAliceLun, kOpenLun, PerEnd("", "/d"));
  REQUIRE_FALSE(ends.ok());
  CHECK(ends.status().code() == StatusCode::kInvalidArgument);
  CHECK(ends.status().message().find("--destination-chap-secret-file: the destination URL names "
                                     "no CHAP user") != std::string::npos);
}

TEST_CASE("copy credentials: --chap-secret-file serves the one end whose URL names a user",
          "[copy][chap]") {
  CopyCredentialFlags flags;
  flags.shared.chap_secret_file = "/s";
  flags.shared.target_chap_user = "tgt";
  Result<CopyEndFlags> to_open = ResolveCopyCredentials(kAliceLun, kOpenLun, flags);
  REQUIRE(to_open.ok());
  CHECK(to_open->source.chap_secret_file == "/s");
  CHECK(to_open->source.target_chap_user == "tgt");
  CHECK(to_open->destination.chap_secret_file.empty());
  CHECK(to_open->destination.target_chap_user.empty());
  Result<CopyEndFlags> from_open = ResolveCopyCredentials(kOpenLun, kBobLun, flags);
  REQUIRE(from_open.ok());
  CHECK(from_open->source.chap_secret_file.empty());
  CHECK(from_open->destination.chap_secret_file == "/s");
  CHECK(from_open->destination.target_chap_user == "tgt");
}

TEST_CASE("copy credentials: --chap-secret-file with a user at both ends names the flags to use",
          "[copy][chap]") {
  CopyCredentialFlags flags;
  flags.shared.chap_secret_file = "/s";
  Result<CopyEndFlags> ends = ResolveCopyCredentials(kAliceLun, kBobLun, flags);
  REQUIRE_FALSE(ends.ok());
  CHECK(ends.status().message().find(
            "--source-chap-secret-file and --destination-chap-secret-file") != std::string::npos);
}

TEST_CASE("copy credentials: mutual CHAP with a user at both ends is refused", "[copy][chap]") {
  CopyCredentialFlags flags = PerEnd("/a", "/b");
  flags.shared.target_chap_user = "tgt";
  Result<CopyEndFlags> ends = ResolveCopyCredentials(kAliceLun, kBobLun, flags);
  REQUIRE_FALSE(ends.ok());
  CHECK(ends.status().message().find("mutual CHAP") != std::string::npos);
}

TEST_CASE("copy credentials: --chap-secret-file and per-end secrets together are refused",
          "[copy][chap]") {
  CopyCredentialFlags flags = PerEnd("/a", "");
  flags.shared.chap_secret_file = "/s";
  CHECK_FALSE(ResolveCopyCredentials(kAliceLun, kOpenLun, flags).ok());
}

TEST_CASE("copy credentials: a file at one end keeps the flags as given", "[copy][chap]") {
  CopyCredentialFlags flags;
  flags.shared.chap_user = "alice";
  flags.shared.chap_secret_file = "/s";
  Result<CopyEndFlags> ends = ResolveCopyCredentials(kOpenLun, "disk.img", flags);
  REQUIRE(ends.ok());
  CHECK(ends->source.chap_secret_file == "/s");
}

}  // namespace
}  // namespace wanbackup::cli
