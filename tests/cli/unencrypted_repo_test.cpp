// An unencrypted repository (`init --insecure-no-encryption`) is used only on purpose: every
// command needs --insecure-no-encryption, reads warn, and credentials given for it are refused
// (what catches one swapped in on a host without a trust anchor). The real binary, local images.
#include <filesystem>
#include <fstream>
#include <map>

#include <catch2/catch.hpp>

#include "support/repo_cli.h"

using wanbackup::testing::RepoCli;
using wanbackup::testing::RunResult;
using wanbackup::testing::SameFile;
using wanbackup::testing::TempDir;
using wanbackup::testing::TreeContents;
using wanbackup::testing::WriteNoiseImage;

namespace {

// No credentials at all: RepoCli's default key file would be refused (the last test case).
const std::map<std::string, std::string> kNoKey = {{"WANBACKUP_KEY_FILE", ""}};

void RequireExit3OneLine(const RunResult& r, const std::string& needle) {
  INFO("exit " << r.exit_code << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 3);
  CHECK(r.err.find(needle) != std::string::npos);
  CHECK(r.err.find('\n') == r.err.size() - 1);
}

// An unencrypted repository with one snapshot of a.img, made on purpose.
void PlainRepository(const TempDir& dir, const RepoCli& repo) {
  WriteNoiseImage(dir / "a.img", 1, 2);
  repo.Ok({"init", "--insecure-no-encryption"}, "", kNoKey);
  repo.Ok({"snapshot", dir / "a.img", "--insecure-no-encryption"}, "", kNoKey);
}

}  // namespace

TEST_CASE("plain: every command on an unencrypted repository needs --insecure-no-encryption",
          "[plain]") {
  TempDir dir("plain-flag");
  RepoCli repo(dir);
  PlainRepository(dir, repo);
  const auto files = TreeContents(repo.path());
  for (const std::vector<std::string>& args : {std::vector<std::string>{"snapshots"},
                                               {"verify"},
                                               {"snapshot", dir / "a.img"},
                                               {"restore", "latest", "--to", dir / "out.img"},
                                               {"forget", "--keep-last", "1"},
                                               {"prune"}}) {
    INFO(args[0]);
    RequireExit3OneLine(repo.Wb(args, "", kNoKey),
                        "repository " + repo.path() +
                            " is not encrypted: anyone who can write its storage can change what "
                            "it restores; pass --insecure-no-encryption to use it anyway");
  }
  CHECK_FALSE(std::filesystem::exists(dir / "out.img"));
  CHECK(TreeContents(repo.path()) == files);
}

TEST_CASE("plain: reads of an unencrypted repository warn even with the flag", "[plain]") {
  TempDir dir("plain-warn");
  RepoCli repo(dir);
  PlainRepository(dir, repo);
  const std::string warning = "is NOT encrypted";
  CHECK(repo.Ok({"snapshots", "--insecure-no-encryption"}, "", kNoKey).err.find(warning) !=
        std::string::npos);
  CHECK(repo.Ok({"verify", "--insecure-no-encryption"}, "", kNoKey).err.find(warning) !=
        std::string::npos);
  const RunResult restore = repo.Ok(
      {"restore", "latest", "--to", dir / "out.img", "--insecure-no-encryption"}, "", kNoKey);
  CHECK(restore.err.find(warning) != std::string::npos);
  CHECK(SameFile(dir / "out.img", dir / "a.img"));
}

TEST_CASE("plain: credentials given for an unencrypted repository are refused", "[plain]") {
  TempDir dir("plain-creds");
  RepoCli repo(dir);
  PlainRepository(dir, repo);
  std::ofstream(dir / "pass.txt") << "a passphrase\n";
  const std::string expected = "is not encrypted and takes no passphrase or key file";
  const std::vector<std::string> restore = {"restore", "latest", "--to", dir / "out.img",
                                            "--insecure-no-encryption"};
  // $WANBACKUP_PASSWORD, $WANBACKUP_PASSWORD_FILE, --password-file, --key-file, $WANBACKUP_KEY_FILE
  RequireExit3OneLine(repo.Wb(restore, "a passphrase", kNoKey), expected);
  RequireExit3OneLine(
      repo.Wb(restore, "",
              {{"WANBACKUP_KEY_FILE", ""}, {"WANBACKUP_PASSWORD_FILE", dir / "pass.txt"}}),
      expected);
  std::vector<std::string> with_file = restore;
  with_file.insert(with_file.end(), {"--password-file", dir / "pass.txt"});
  RequireExit3OneLine(repo.Wb(with_file, "", kNoKey), expected);
  std::vector<std::string> with_key = restore;
  with_key.insert(with_key.end(), {"--key-file", repo.key()});
  RequireExit3OneLine(repo.Wb(with_key, "", kNoKey), expected);
  RequireExit3OneLine(repo.Wb(restore), expected);  // RepoCli's default: $WANBACKUP_KEY_FILE
  CHECK_FALSE(std::filesystem::exists(dir / "out.img"));
  // Without a flag either, the missing flag is what is named (it is checked first).
  RequireExit3OneLine(repo.Wb({"snapshots"}, "a passphrase", kNoKey), "--insecure-no-encryption");
}
