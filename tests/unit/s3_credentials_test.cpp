// An S3 repository's keys from an AWS shared-credentials file (store/s3_pack_store.h).
#include <sys/stat.h>

#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "store/s3_pack_store.h"
#include "support/temp_dir.h"

using wanbackup::Result;
using wanbackup::StatusCode;
using wanbackup::pipeline::S3Credentials;
using wanbackup::pipeline::S3CredentialsFromFile;
using wanbackup::testing::TempDir;

namespace {

std::string CredentialsFile(const TempDir& dir, const std::string& text, mode_t mode = 0600) {
  std::string path = dir / "s3.cred";
  std::ofstream(path, std::ios::trunc) << text;
  REQUIRE(::chmod(path.c_str(), mode) == 0);
  return path;
}

}  // namespace

TEST_CASE("s3 credentials file: the [default] profile's keys and region, comments skipped",
          "[s3]") {
  TempDir dir("s3cred");
  const std::string path = CredentialsFile(dir,
                                           "# site B's gateway\n"
                                           "[other]\n"
                                           "aws_access_key_id = NOTTHIS\n"
                                           "aws_secret_access_key = nor-this\n"
                                           "\n"
                                           "[default]\n"
                                           "aws_access_key_id = AKIDEXAMPLE ; the backup user\n"
                                           "aws_secret_access_key=wJalr/XUtnFEMI+K7MDENG\r\n"
                                           "region = eu-central-1\n");
  Result<S3Credentials> c = S3CredentialsFromFile(path);
  REQUIRE(c.ok());
  CHECK(c->access_key_id == "AKIDEXAMPLE");
  CHECK(c->secret_access_key.reveal() == "wJalr/XUtnFEMI+K7MDENG");
  CHECK(c->region == "eu-central-1");
  // Keys before any profile are the default profile's; the region defaults.
  Result<S3Credentials> bare =
      S3CredentialsFromFile(CredentialsFile(dir, "aws_access_key_id=A\naws_secret_access_key=B\n"));
  REQUIRE(bare.ok());
  CHECK(bare->region == "us-east-1");
}

TEST_CASE(
    "s3 credentials file: a missing key, an unknown key, a bad line or a file others can read "
    "is one line naming the file, never the secret",
    "[s3]") {
  TempDir dir("s3cred-bad");
  struct Case {
    std::string text;
    mode_t mode;
    StatusCode code;
    std::string says;
  };
  const Case cases[] = {
      {"aws_access_key_id = A\n", 0600, StatusCode::kInvalidArgument, "no aws_secret_access_key"},
      {"[default]\naws_secret_access_key = s3cr3t\n", 0600, StatusCode::kInvalidArgument,
       "no aws_access_key_id"},
      {"aws_access_key_id = A\naws_secret_access_key = s3cr3t\ncolour = blue\n", 0600,
       StatusCode::kInvalidArgument, "s3.cred:3: unknown key 'colour'"},
      {"aws_access_key_id A\n", 0600, StatusCode::kInvalidArgument, "s3.cred:1: not 'key = value'"},
      {"aws_access_key_id = A\naws_secret_access_key = s3cr3t\naws_session_token = t\n", 0600,
       StatusCode::kInvalidArgument, "temporary credentials are not supported"},
      {"aws_access_key_id = A\naws_secret_access_key = s3cr3t\n", 0644,
       StatusCode::kPermissionDenied, "S3 credentials file"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    Result<S3Credentials> r = S3CredentialsFromFile(CredentialsFile(dir, c.text, c.mode));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == c.code);
    CHECK(r.status().message().find(c.says) != std::string::npos);
    CHECK(r.status().message().find("s3cr3t") == std::string::npos);
    CHECK(r.status().message().find('\n') == std::string::npos);
  }
  CHECK(S3CredentialsFromFile(dir / "missing.cred").status().code() == StatusCode::kNotFound);
}
