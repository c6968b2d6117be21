// What init, key change and the config and credential loaders refuse so that neither a slip nor
// another local user can weaken a repository (docs/threat-model.md, "Adversarial review of
// writing commands (2026-11-28)"): short passphrases, keys kept inside a repository, repositories
// in directories others can write, and files reached through another user's links or FIFOs.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "support/other_user.h"
#include "support/repo_cli.h"
#include "support/skip.h"
#include "support/temp_dir.h"

namespace wanbackup::testing {
namespace {

TEST_CASE("local user: init and key change refuse a passphrase shorter than 8 characters",
          "[cli]") {
  TempDir dir{"short-pass"};
  RepoCli repo{dir};
  CheckOneLineError(repo.Wb({"init"}, "abc"), 2,
                    "the new passphrase has 3 characters; give at least 8");
  CHECK(!std::filesystem::exists(repo.path()));
  repo.Ok({"init"}, "long enough");
  const std::string config = FileContents(repo.path() + "/config.json");
  CheckOneLineError(
      repo.Wb({"key", "change"}, "long enough", {{"WANBACKUP_NEW_PASSWORD", "1234567"}}), 2,
      "the new passphrase has 7 characters");
  CHECK(FileContents(repo.path() + "/config.json") == config);
  repo.Ok({"key", "change"}, "long enough", {{"WANBACKUP_NEW_PASSWORD", "12345678"}});
}

TEST_CASE("local user: a key file inside a repository is refused by init and key change", "[cli]") {
  TempDir dir{"key-in-repo"};
  RepoCli repo{dir};
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  const std::string other = dir / "other";
  CheckOneLineError(repo.Wb({"init", other, "--key-file", repo.path() + "/other.key"}), 2,
                    "--key-file " + repo.path() + "/other.key lies in a repository");
  CheckOneLineError(repo.Wb({"init", other, "--key-file", other + "/own.key"}), 2,
                    "lies in a repository");
  CHECK(!std::filesystem::exists(other));
  CheckOneLineError(repo.Wb({"key", "change", "--new-key-file", repo.path() + "/packs/new.key"}), 2,
                    "--new-key-file " + repo.path() + "/packs/new.key lies in a repository");
  CHECK(!std::filesystem::exists(repo.path() + "/packs/new.key"));
  // Nor a repository inside another one, whose prune and repair would take its files.
  for (const std::string& inner :
       {repo.path() + "/packs/inner", repo.path() + "/readers/r", repo.path() + "/inner"}) {
    CheckOneLineError(repo.Wb({"init", inner, "--key-file", dir / "inner.key"}), 2,
                      inner + " lies in repository " + repo.path());
    CHECK(!std::filesystem::exists(inner));
  }
  const std::string anchors = std::string(std::getenv("WANBACKUP_SECURITY_DIR")) + "/repo";
  CheckOneLineError(repo.Wb({"init", anchors, "--key-file", dir / "inner.key"}), 2,
                    "lies in the trust anchor directory");
  CHECK(!std::filesystem::exists(anchors));
}

TEST_CASE(
    "local user: init refuses a directory others can write, and commands that write refuse a "
    "repository anybody may write",
    "[cli]") {
  TempDir dir{"open-dir"};
  RepoCli repo{dir};
  const std::string shared = dir / "shared";
  REQUIRE(::mkdir(shared.c_str(), 0777) == 0);
  REQUIRE(::chmod(shared.c_str(), 0777) == 0);  // whatever the umask
  CheckOneLineError(repo.Wb({"init", shared, "--key-file", repo.key()}), 5,
                    shared + ": writable by group or others (mode 0777)");
  CHECK(std::filesystem::is_empty(shared));
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  const std::string image = dir / "disk.img";
  WriteNoiseImage(image, 1, 2);
  repo.Ok({"snapshot", image});
  REQUIRE(::chmod(repo.path().c_str(), 0777) == 0);
  const auto before = TreeContents(repo.path());
  CheckOneLineError(repo.Wb({"prune"}), 5,
                    repo.path() + ": writable by group or others (mode 0777)");
  CheckOneLineError(repo.Wb({"snapshot", image}), 5, "refuses one another user can change");
  CHECK(repo.Wb({"snapshots"}).exit_code == 0);  // reading is still fine
  CHECK(TreeContents(repo.path()) == before);
  REQUIRE(::chmod(repo.path().c_str(), 0700) == 0);
  repo.Ok({"prune"});
}

TEST_CASE(
    "local user: a config through another user's link, a FIFO they planted as a credential, and "
    "a key file to be made in their directory are refused",
    "[cli]") {
  if (!CanSwitchUser()) WB_SKIP("needs root to act as another user");
  TempDir dir{"their-links"};
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);  // the other user reaches their directory
  RepoCli repo{dir};
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  const std::string theirs = dir / "theirs";
  REQUIRE(::mkdir(theirs.c_str(), 0755) == 0);
  REQUIRE(::chown(theirs.c_str(), kOtherUid, kOtherGid) == 0);
  // Root's own config in root's own directory, reached through the other user's link.
  const std::string etc = dir / "etc";
  REQUIRE(::mkdir(etc.c_str(), 0755) == 0);
  const std::string config = etc + "/wanbackup.toml";
  std::ofstream(config) << "[repositories.main]\npath = \"" << repo.path() << "\"\nkey_file = \""
                        << repo.key() << "\"\n\n[jobs.disk]\nrepository = \"main\"\nsource = \""
                        << dir / "disk.img"
                        << "\"\n";
  REQUIRE(::chmod(config.c_str(), 0600) == 0);
  const std::string link = theirs + "/etc";
  REQUIRE(AsOtherUser([&] { return ::symlink(etc.c_str(), link.c_str()) == 0; }));
  CheckOneLineError(repo.Wb({"jobs", "--config", link + "/wanbackup.toml"}), 2,
                    theirs + ": owned by uid " + std::to_string(kOtherUid));
  CHECK(repo.Wb({"jobs", "--config", config}).exit_code == 0);
  // A FIFO the other user made in a sticky directory, as the new key file: refused at once.
  const std::string pub = dir / "pub";
  REQUIRE(::mkdir(pub.c_str(), 0777) == 0);
  REQUIRE(::chmod(pub.c_str(), 01777) == 0);
  const std::string fifo = pub + "/new.key";
  REQUIRE(AsOtherUser([&] { return ::mkfifo(fifo.c_str(), 0666) == 0; }));
  const std::string before = FileContents(repo.path() + "/config.json");
  CheckOneLineError(repo.Wb({"key", "change", "--new-key-file", fifo}), 5,
                    fifo + ": owned by uid " + std::to_string(kOtherUid));
  CheckOneLineError(repo.Wb({"init", dir / "fifo-repo", "--key-file", fifo}), 5, "owned by uid");
  CHECK(FileContents(repo.path() + "/config.json") == before);
  // A key file that does not exist yet, in the other user's directory: not made at all.
  const std::string made = theirs + "/new.key";
  CheckOneLineError(repo.Wb({"key", "change", "--new-key-file", made}), 5,
                    theirs + ": owned by uid " + std::to_string(kOtherUid));
  CHECK(!std::filesystem::exists(made));
}

TEST_CASE(
    "local user: replicate writes in place into another user's file only where nobody else can "
    "create files",
    "[cli]") {
  if (!CanSwitchUser()) WB_SKIP("needs root to act as another user");
  TempDir dir{"their-replica"};
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
  RepoCli repo{dir};
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  const std::string image = dir / "disk.img";
  WriteNoiseImage(image, 5, 2);
  repo.Ok({"snapshot", image});
  // Their directory: root's replica there, removed, and a file of theirs made in its place.
  const std::string theirs = dir / "theirs";
  REQUIRE(::mkdir(theirs.c_str(), 0755) == 0);
  REQUIRE(::chown(theirs.c_str(), kOtherUid, kOtherGid) == 0);
  const std::string replica = theirs + "/replica.img";
  repo.Ok({"replicate", "1", "--to", replica});
  REQUIRE(AsOtherUser([&] {
    if (::unlink(replica.c_str()) != 0) return false;
    std::ofstream(replica) << "mine";
    return ::chmod(replica.c_str(), 0644) == 0;
  }));
  CheckOneLineError(repo.Wb({"replicate", "1", "--to", replica, "--force"}), 2,
                    replica + " is owned by uid " + std::to_string(kOtherUid) + " in " + theirs +
                        ", where others can create files");
  CHECK(FileContents(replica) == "mine");
  // A standby image a service user owns, in root's own directory: written as asked.
  const std::string standby = dir / "standby.img";
  std::ofstream(standby) << "old";
  REQUIRE(::chown(standby.c_str(), kOtherUid, kOtherGid) == 0);
  repo.Ok({"replicate", "1", "--to", standby, "--force"});
  CHECK(SameFile(standby, image));
}

TEST_CASE(
    "local user: restore --force and replicate refuse a file of root's that the owner of a "
    "directory on the way could have renamed into the name given",
    "[cli]") {
  if (!CanSwitchUser()) WB_SKIP("needs root to act as another user");
  TempDir dir{"renamed-dest"};
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
  RepoCli repo{dir};
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  const std::string image = dir / "disk.img";
  WriteNoiseImage(image, 6, 2);
  repo.Ok({"snapshot", image});
  // Their directory holds a root-only directory of root's, with a file only root may write.
  const std::string theirs = dir / "theirs";
  REQUIRE(::mkdir(theirs.c_str(), 0755) == 0);
  REQUIRE(::chown(theirs.c_str(), kOtherUid, kOtherGid) == 0);
  const std::string private_dir = theirs + "/private";
  REQUIRE(::mkdir(private_dir.c_str(), 0700) == 0);
  std::ofstream(private_dir + "/disk.img") << "root's own";
  // They rename it to the name of the VM directory root is about to restore into.
  const std::string vm = theirs + "/vmB";
  REQUIRE(AsOtherUser([&] { return ::rename(private_dir.c_str(), vm.c_str()) == 0; }));
  const std::string victim = vm + "/disk.img";
  std::string refusal = victim;
  refusal += " is a file of uid 0 in " + theirs;
  refusal += ", which another user can change (owned by uid " + std::to_string(kOtherUid) + ")";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"restore", "1", "--to", victim, "--force"},
        std::vector<std::string>{"replicate", "1", "--to", victim, "--force"}}) {
    INFO(args.front());
    CheckOneLineError(repo.Wb(args), 2, refusal);
    CHECK(FileContents(victim) == "root's own");
  }
  // A link of root's to a root-only file, renamed by them into their directory: neither
  // written through nor read through (round 6, W4, W5).
  const std::string vault = dir / "vault";
  REQUIRE(::mkdir(vault.c_str(), 0700) == 0);
  std::ofstream(vault + "/secret.img") << "root's secret";
  const std::string made = vault + "/link";
  REQUIRE(::symlink((vault + "/secret.img").c_str(), made.c_str()) == 0);
  const std::string planted = theirs + "/link.img";
  REQUIRE(::rename(made.c_str(), planted.c_str()) == 0);  // as their rename out of a root dir
  CheckOneLineError(repo.Wb({"restore", "1", "--to", planted, "--force"}), 2,
                    "which another user can change (owned by uid " + std::to_string(kOtherUid));
  CHECK(FileContents(vault + "/secret.img") == "root's secret");
  CheckOneLineError(repo.Wb({"snapshot", planted}), 2,
                    "which another user can change (owned by uid " + std::to_string(kOtherUid));
  // A file of theirs in their directory is theirs to have replaced, as before.
  const std::string mine = dir / "mine";
  REQUIRE(::mkdir(mine.c_str(), 0755) == 0);
  REQUIRE(::chown(mine.c_str(), kOtherUid, kOtherGid) == 0);
  const std::string their_file = mine + "/disk.img";
  REQUIRE(AsOtherUser([&] {
    std::ofstream(their_file) << "theirs";
    return std::filesystem::exists(their_file);
  }));
  const RunResult replaced = repo.Ok({"restore", "1", "--to", their_file, "--force"});
  CHECK(SameFile(their_file, image));
  // Root's 0600 file now, since they could have put theirs at that name to be handed the disk;
  // and said so (round 6, W3).
  struct stat st {};
  REQUIRE(::stat(their_file.c_str(), &st) == 0);
  CHECK(st.st_uid == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(replaced.err.find(their_file + " was a file of uid " + std::to_string(kOtherUid)) !=
        std::string::npos);
  // Their file in root's own directory (a standby VM's image its service user owns): the new
  // file keeps its owner, group and mode.
  const std::string standby = dir / "standby.img";
  std::ofstream(standby) << "old";
  REQUIRE(::chown(standby.c_str(), kOtherUid, kOtherGid) == 0);
  REQUIRE(::chmod(standby.c_str(), 0640) == 0);
  const RunResult kept = repo.Ok({"restore", "1", "--to", standby, "--force"});
  CHECK(SameFile(standby, image));
  REQUIRE(::stat(standby.c_str(), &st) == 0);
  CHECK(st.st_uid == kOtherUid);
  CHECK(st.st_gid == kOtherGid);
  CHECK((st.st_mode & 0777) == 0640);
  CHECK(kept.err.find("was a file of uid") == std::string::npos);
}

}  // namespace
}  // namespace wanbackup::testing
