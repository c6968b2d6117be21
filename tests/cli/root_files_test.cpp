// What wanbackup, run as root, does with files another local user controls (issue 39): it never
// writes or chmods through a link that user planted, and it refuses a config or credential file
// that user owns or could swap. The other user is nobody (support/other_user.h); root only.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "support/other_user.h"
#include "support/repo_cli.h"
#include "support/skip.h"
#include "support/temp_dir.h"

namespace wanbackup::testing {
namespace {

// A job "disk" of a small local image into a key-file repository, in a directory everybody may
// enter (0755) so that the other user reaches what the test gives them.
struct RootJob {
  TempDir dir{"rootfiles"};
  RepoCli repo{dir};
  std::string image = dir / "disk.img";

  RootJob() {
    REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
    repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
    WriteNoiseImage(image, 1, 1);
  }
  // Writes the config at `path` (mode 0600, root's) with `extra` after the job.
  void WriteConfig(const std::string& path, const std::string& extra = "") const {
    std::ofstream(path) << "[repositories.main]\npath = \"" << repo.path() << "\"\nkey_file = \""
                        << repo.key() << "\"\n\n[jobs.disk]\nrepository = \"main\"\nsource = \""
                        << image << "\"\n"
                        << extra;
    REQUIRE(::chmod(path.c_str(), 0600) == 0);
  }
  RunResult Run(const std::string& config) const {
    return repo.Wb({"run", "disk", "--config", config});
  }
};

std::string Contents(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode;
}

// The next process ids the kernel will hand out (a guess, as an attacker makes it).
pid_t LastPid() {
  std::ifstream in("/proc/sys/kernel/ns_last_pid");
  pid_t pid = 0;
  in >> pid;
  return pid;
}

}  // namespace

TEST_CASE("metrics: symlinks another user plants in the textfile directory redirect no write",
          "[rootfiles]") {
  if (!CanSwitchUser()) WB_SKIP("needs root to act as another user");
  RootJob job;
  const std::string textdir = job.dir / "textfile";
  REQUIRE(::mkdir(textdir.c_str(), 0755) == 0);
  REQUIRE(::chmod(textdir.c_str(), 01777) == 0);  // like a shared textfile directory
  const std::string prom = textdir + "/wanbackup.prom";
  const std::string victim = job.dir / "root-only";
  std::ofstream(victim) << "precious\n";
  REQUIRE(::chmod(victim.c_str(), 0600) == 0);
  const std::string config = job.dir / "wanbackup.toml";
  job.WriteConfig(config, "\n[metrics]\ntextfile = \"" + prom + "\"\n");

  // The link at the file itself, and at every temporary name the next few thousand processes
  // would use: wanbackup.prom.tmp<pid>, as the old code named it.
  const pid_t next = LastPid();
  REQUIRE(AsOtherUser([&] {
    if (::symlink(victim.c_str(), prom.c_str()) != 0) return false;
    for (pid_t pid = next; pid < next + 4000; ++pid) {
      const std::string tmp = prom + ".tmp" + std::to_string(pid);
      if (::symlink(victim.c_str(), tmp.c_str()) != 0) return false;
    }
    return true;
  }));

  const RunResult r = job.Run(config);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contents(victim) == "precious\n");
  CHECK((ModeOf(victim) & 07777) == 0600);
  // The file is a new, root's, world-readable file (the link replaced, not followed).
  CHECK(S_ISREG(ModeOf(prom)));
  CHECK((ModeOf(prom) & 07777) == 0644);
  CHECK(Contents(prom).find("wanbackup_job_last_run_timestamp_seconds{job=\"disk\"}") !=
        std::string::npos);
  // No temporary of ours is left: every name there but the file is one the other user planted.
  for (const auto& e : std::filesystem::directory_iterator(textdir)) {
    if (e.path() == prom) continue;
    CHECK(e.is_symlink());
  }
}

TEST_CASE("run: a config file another user owns is refused when root runs it, naming its owner",
          "[rootfiles]") {
  if (!CanSwitchUser()) WB_SKIP("needs root to act as another user");
  RootJob job;
  const std::string config = job.dir / "wanbackup.toml";
  job.WriteConfig(config);
  REQUIRE(::chown(config.c_str(), kOtherUid, kOtherGid) == 0);
  const auto before = TreeContents(job.repo.path());
  const RunResult r = job.Run(config);
  CHECK(r.exit_code == 2);
  CHECK(r.err == "wanbackup: error: " + config + ": owned by uid " + std::to_string(kOtherUid) +
                     ", not root or you\n");
  CHECK(TreeContents(job.repo.path()) == before);
}

TEST_CASE("run: a config file in a directory another user can write is refused, naming it",
          "[rootfiles]") {
  if (!CanSwitchUser()) WB_SKIP("needs root to act as another user");
  RootJob job;
  for (const bool sticky : {false, true}) {
    const std::string shared = job.dir / (sticky ? "sticky" : "theirs");
    REQUIRE(::mkdir(shared.c_str(), 0755) == 0);
    if (sticky) {
      // As /tmp: others may add entries but not swap root's, so the directory itself passes;
      // what fails is a directory in it that the other user made.
      REQUIRE(::chmod(shared.c_str(), 01777) == 0);
    } else {
      REQUIRE(::chown(shared.c_str(), kOtherUid, kOtherGid) == 0);
    }
    const std::string where = sticky ? shared + "/made-by-them" : shared;
    if (sticky) {
      REQUIRE(::mkdir(where.c_str(), 0755) == 0);
      REQUIRE(::chown(where.c_str(), kOtherUid, kOtherGid) == 0);
    }
    const std::string config = where + "/wanbackup.toml";
    job.WriteConfig(config);  // root's own file, mode 0600: the directory is what fails
    const RunResult r = job.Run(config);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.rfind("wanbackup: error: " + where + ": owned by uid " + std::to_string(kOtherUid),
                      0) == 0);
    CHECK(r.err.find('\n') == r.err.size() - 1);
  }
}

TEST_CASE("key change: a new passphrase file others can read is refused, as the config refuses it",
          "[rootfiles]") {
  RootJob job;
  const std::string pass = job.dir / "new-pass";
  std::ofstream(pass) << "a new passphrase\n";
  REQUIRE(::chmod(pass.c_str(), 0644) == 0);
  const std::string config_before = Contents(job.repo.path() + "/config.json");
  const RunResult r = job.repo.Wb({"key", "change", "--new-password-file", pass});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find(pass + ": readable by others (mode 0644); it holds a secret: chmod 600 " +
                   pass) != std::string::npos);
  CHECK(Contents(job.repo.path() + "/config.json") == config_before);
  // The config loader says the same of the same file.
  const std::string config = job.dir / "wanbackup.toml";
  std::ofstream(config) << "[repositories.main]\npath = \"" << job.repo.path()
                        << "\"\npassword_file = \"" << pass << "\"\n";
  REQUIRE(::chmod(config.c_str(), 0600) == 0);
  const RunResult jobs = job.repo.Wb({"jobs", "--config", config});
  CHECK(jobs.exit_code == 2);
  CHECK(jobs.err.find(pass + ": readable by others (mode 0644)") != std::string::npos);
}

}  // namespace wanbackup::testing
