// What wanbackup, run as root, does with files another local user controls (issue 39): it never
// writes or chmods through a link that user planted, and it refuses a config or credential file
// that user owns or could swap. The other user is nobody (support/other_user.h); root only.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

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

TEST_CASE("metrics: samples another user planted first in a shared textfile directory are dropped",
          "[rootfiles]") {
  if (!CanSwitchUser()) WB_SKIP("needs root to act as another user");
  RootJob job;
  const std::string textdir = job.dir / "shared-textfile";
  REQUIRE(::mkdir(textdir.c_str(), 0755) == 0);
  REQUIRE(::chmod(textdir.c_str(), 01777) == 0);
  const std::string prom = textdir + "/wanbackup.prom";
  const std::string config = job.dir / "wanbackup.toml";
  job.WriteConfig(config, "\n[metrics]\ntextfile = \"" + prom + "\"\n");
  // A success of job "db" far in the future: its "no success for a day" alert would never fire.
  REQUIRE(AsOtherUser([&] {
    std::ofstream(prom) << "wanbackup_job_last_success_timestamp_seconds{job=\"db\"} 9999999999\n";
    return ::chmod(prom.c_str(), 0644) == 0;
  }));
  const RunResult r = job.Run(config);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(ModeOf(prom) != 0);
  CHECK(Contents(prom).find("job=\"disk\"") != std::string::npos);
  CHECK(Contents(prom).find("job=\"db\"") == std::string::npos);
}

TEST_CASE(
    "metrics: a directory or FIFO another user plants at the textfile's name in a shared "
    "directory stops no backup, and a run that cannot write its metrics says so in its exit",
    "[rootfiles]") {
  if (!CanSwitchUser()) WB_SKIP("needs root to act as another user");
  RootJob job;
  const std::string textdir = job.dir / "shared-textfile";
  REQUIRE(::mkdir(textdir.c_str(), 0755) == 0);
  REQUIRE(::chmod(textdir.c_str(), 01777) == 0);  // as the docs allow
  const std::string prom = textdir + "/wanbackup.prom";
  const std::string config = job.dir / "wanbackup.toml";
  job.WriteConfig(config, "\n[metrics]\ntextfile = \"" + prom + "\"\n");
  // A FIFO of theirs: replaced, the run as usual (before: every command refused the config).
  REQUIRE(AsOtherUser([&] { return ::mkfifo(prom.c_str(), 0666) == 0; }));
  CHECK(job.repo.Wb({"run", "disk", "--dry-run", "--config", config}).exit_code == 0);
  const RunResult fifo = job.Run(config);
  INFO(fifo.err);
  CHECK(fifo.exit_code == 0);
  CHECK(S_ISREG(ModeOf(prom)));
  // A directory of theirs, which a rename cannot replace: the snapshot is taken all the same,
  // and the run's exit says the metrics were not written.
  REQUIRE(::unlink(prom.c_str()) == 0);
  REQUIRE(AsOtherUser([&] { return ::mkdir(prom.c_str(), 0755) == 0; }));
  const RunResult dir = job.Run(config);
  INFO(dir.err);
  CHECK(dir.exit_code != 0);
  CHECK_THAT(dir.err, Catch::Contains("metrics"));
  CHECK(dir.exit_code == 1);
  // And its history says so, as `jobs` does (before: "ok"; round 9, Z5).
  const RunResult jobs = job.repo.Wb({"jobs", "--config", config, "--json"});
  REQUIRE(jobs.exit_code == 0);
  const std::string listed = jobs.out;
  CHECK(listed.find("\"failed\"") != std::string::npos);
  CHECK(listed.find("metrics") != std::string::npos);
  // Both runs took their snapshot.
  CHECK(nlohmann::json::parse(job.repo.Ok({"snapshots", "--json"}).out).size() == 2);
}

TEST_CASE(
    "metrics: a textfile directory reached through a link another user planted, or owned by "
    "them, is refused and nothing is written there",
    "[rootfiles]") {
  if (!CanSwitchUser()) WB_SKIP("needs root to act as another user");
  RootJob job;
  const std::string shared = job.dir / "pub";
  REQUIRE(::mkdir(shared.c_str(), 0755) == 0);
  REQUIRE(::chmod(shared.c_str(), 01777) == 0);
  const std::string secret_dir = job.dir / "root-only";
  REQUIRE(::mkdir(secret_dir.c_str(), 0700) == 0);
  const std::string victim = secret_dir + "/wanbackup.prom";
  std::ofstream(victim) << "precious\n";
  REQUIRE(::chmod(victim.c_str(), 0600) == 0);
  const std::string planted = shared + "/promdir", theirs = shared + "/theirs";
  REQUIRE(AsOtherUser([&] {
    return ::symlink(secret_dir.c_str(), planted.c_str()) == 0 &&
           ::mkdir(theirs.c_str(), 0755) == 0;
  }));
  const std::string config = job.dir / "wanbackup.toml";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {planted, planted + " is a symlink owned by uid " + std::to_string(kOtherUid)},
      {theirs, theirs + ": owned by uid " + std::to_string(kOtherUid) + ", not root or you"},
  };
  for (const auto& [dir, says] : cases) {
    INFO(dir);
    job.WriteConfig(config, "\n[metrics]\ntextfile = \"" + dir + "/wanbackup.prom\"\n");
    const RunResult dry = job.repo.Wb({"run", "disk", "--dry-run", "--config", config});
    CHECK(dry.exit_code == 2);
    CHECK_THAT(dry.err, Catch::Contains("[metrics] textfile: " + says));
    // The run is refused as its dry run is, before anything (before: it ran, wrote no metrics
    // and exited 0 with a warning, so monitoring went stale without a word; round 7, X4).
    const RunResult r = job.Run(config);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("[metrics] textfile: " + says));
  }
  CHECK(Contents(victim) == "precious\n");
  CHECK((ModeOf(victim) & 07777) == 0600);
  CHECK(std::distance(std::filesystem::directory_iterator(secret_dir),
                      std::filesystem::directory_iterator()) == 1);
  CHECK(std::filesystem::is_empty(theirs));
}

TEST_CASE(
    "restore, replicate, copy: a symlink another user planted at the destination is not "
    "followed, --force or not",
    "[rootfiles]") {
  if (!CanSwitchUser()) WB_SKIP("needs root to act as another user");
  RootJob job;
  job.repo.Ok({"snapshot", job.image});
  const std::string victim = job.dir / "root-only";
  std::ofstream(victim) << "precious\n";
  REQUIRE(::chmod(victim.c_str(), 0600) == 0);
  const std::string sticky = job.dir / "pub", theirs = job.dir / "theirs";
  REQUIRE(::mkdir(sticky.c_str(), 0755) == 0);
  REQUIRE(::chmod(sticky.c_str(), 01777) == 0);
  REQUIRE(::mkdir(theirs.c_str(), 0755) == 0);
  REQUIRE(::chown(theirs.c_str(), kOtherUid, kOtherGid) == 0);  // theirs, not sticky
  const std::string a = sticky + "/a.img", b = theirs + "/b.img";
  REQUIRE(AsOtherUser([&] {
    return ::symlink(victim.c_str(), a.c_str()) == 0 && ::symlink(victim.c_str(), b.c_str()) == 0;
  }));
  const std::vector<std::vector<std::string>> commands = {
      {"restore", "1", "--to", a, "--force"},
      {"replicate", "1", "--to", b, "--force"},
      {"replicate", "1", "--to", a},
      {"copy", job.image, b, "--force"},
  };
  for (const std::vector<std::string>& args : commands) {
    const std::string& to = args[args.size() - (args.back() == "--force" ? 2 : 1)];
    INFO(args[0] << " to " << to);
    const RunResult r = job.repo.Wb(args);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err,
               Catch::Contains(to + " is a symlink owned by uid " + std::to_string(kOtherUid) +
                               " in a directory others can "
                               "write"));
    CHECK(r.err.find('\n') == r.err.size() - 1);
  }
  CHECK(Contents(victim) == "precious\n");
  CHECK((ModeOf(victim) & 07777) == 0600);
  // Root's own link there is followed as before.
  const std::string mine = sticky + "/mine.img", real = job.dir / "restored.img";
  REQUIRE(::symlink(real.c_str(), mine.c_str()) == 0);
  job.repo.Ok({"restore", "1", "--to", mine});
  CHECK(SameFile(real, job.image));
}

TEST_CASE(
    "schedule --install: a unit directory others can write or own, a planted drop-in link or a "
    "repository is refused and nothing is written",
    "[rootfiles]") {
  if (!CanSwitchUser()) WB_SKIP("needs root to act as another user");
  RootJob job;
  const std::string config = job.dir / "wanbackup.toml";
  job.WriteConfig(config, "schedule = \"daily\"\n");
  const std::string open = job.dir / "open", theirs = job.dir / "theirs",
                    linked = job.dir / "units";
  const std::string victim = job.dir / "root-only";
  for (const std::string& d : {open, theirs, linked, victim})
    REQUIRE(::mkdir(d.c_str(), 0755) == 0);
  REQUIRE(::chmod(open.c_str(), 01777) == 0);
  REQUIRE(::chown(theirs.c_str(), kOtherUid, kOtherGid) == 0);
  REQUIRE(::chmod(victim.c_str(), 0700) == 0);
  REQUIRE(::symlink(victim.c_str(), (linked + "/wanbackup@disk.service.d").c_str()) == 0);
  REQUIRE(AsOtherUser([&] {  // what they would plant in the shared one
    return ::symlink(victim.c_str(), (open + "/wanbackup@disk.service.d").c_str()) == 0;
  }));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {open, open + ": writable by group or others"},
      {theirs, theirs + ": owned by uid " + std::to_string(kOtherUid)},
      {linked, linked + "/wanbackup@disk.service.d is a symlink or not a directory"},
      {job.repo.path(), "is repository " + job.repo.path()},
  };
  const auto repo_before = TreeContents(job.repo.path());
  for (const auto& [dir, says] : cases) {
    INFO(dir);
    const RunResult r =
        job.repo.Wb({"schedule", "disk", "--install", "--unit-dir", dir, "--config", config});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(says));
  }
  CHECK(std::filesystem::is_empty(victim));
  CHECK(std::filesystem::is_empty(theirs));
  CHECK(!std::filesystem::exists(linked + "/wanbackup@.service"));  // nothing before the refusal
  CHECK(TreeContents(job.repo.path()) == repo_before);
}

TEST_CASE(
    "schedule --install: a unit file that would replace a job's source or the config, or land in "
    "the trust anchor directory, is refused and nothing is written",
    "[rootfiles]") {
  RootJob job;
  const std::string units = job.dir / "units";
  REQUIRE(::mkdir(units.c_str(), 0755) == 0);
  // The job's source and the config file are named as the units would be.
  const std::string source = units + "/wanbackup@.timer";
  REQUIRE(std::filesystem::copy_file(job.image, source));
  const std::string config = units + "/wanbackup@.service";
  std::ofstream(config) << "[repositories.main]\npath = \"" << job.repo.path()
                        << "\"\nkey_file = \"" << job.repo.key()
                        << "\"\n\n[jobs.disk]\nrepository = \"main\"\nsource = \"" << source
                        << "\"\nschedule = \"daily\"\n";
  REQUIRE(::chmod(config.c_str(), 0600) == 0);
  const std::string source_before = Contents(source), config_before = Contents(config);
  RunResult r =
      job.repo.Wb({"schedule", "disk", "--install", "--unit-dir", units, "--config", config});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("is this config file") ||
                        Catch::Contains("is the source of job disk"));
  CHECK(r.err.find('\n') == r.err.size() - 1);
  // After the config moves away, the source is what is refused.
  const std::string moved = job.dir / "wanbackup.toml";
  REQUIRE(::rename(config.c_str(), moved.c_str()) == 0);
  r = job.repo.Wb({"schedule", "disk", "--install", "--unit-dir", units, "--config", moved});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains(source + " is the source of job disk"));
  CHECK(Contents(source) == source_before);
  CHECK(Contents(moved) == config_before);
  CHECK(!std::filesystem::exists(units + "/wanbackup@.service"));  // nothing written
  // The trust anchor directory holds what protects every repository from a rollback.
  const char* anchors = std::getenv("WANBACKUP_SECURITY_DIR");
  REQUIRE(anchors != nullptr);
  REQUIRE((::mkdir(anchors, 0700) == 0 || errno == EEXIST));
  r = job.repo.Wb({"schedule", "disk", "--install", "--unit-dir", anchors, "--config", moved});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("the trust anchor directory"));
  CHECK(!std::filesystem::exists(std::string(anchors) + "/wanbackup@.service"));
}

TEST_CASE(
    "snapshot: a source in another user's directory is read as theirs, never through their "
    "symlink or a second name of a file only root may read",
    "[rootfiles]") {
  if (!CanSwitchUser()) WB_SKIP("needs root to act as another user");
  RootJob job;
  // The VM image its service user owns, in that user's directory: backed up as before.
  const std::string theirs = job.dir / "vm-owner";
  REQUIRE(::mkdir(theirs.c_str(), 0755) == 0);
  REQUIRE(::chown(theirs.c_str(), kOtherUid, kOtherGid) == 0);
  const std::string image = theirs + "/vm.img";
  REQUIRE(std::filesystem::copy_file(job.image, image));
  REQUIRE(::chown(image.c_str(), kOtherUid, kOtherGid) == 0);
  job.repo.Ok({"snapshot", image});
  // They swap it for a link to a file only root can read (a secret disk, /etc/shadow).
  const std::string secret = job.dir / "root-only.img";
  WriteNoiseImage(secret, 1, 2);
  REQUIRE(::chmod(secret.c_str(), 0600) == 0);
  REQUIRE(AsOtherUser([&] {
    return ::unlink(image.c_str()) == 0 && ::symlink(secret.c_str(), image.c_str()) == 0;
  }));
  const auto state = [&job] {  // the lock file names its last holder
    auto all = TreeContents(job.repo.path());
    all.erase(job.repo.path() + "/lock");
    return all;
  };
  const auto before = state();
  RunResult r = job.repo.Wb({"snapshot", image});
  CheckOneLineError(r, 2,
                    image + " is a symlink owned by uid " + std::to_string(kOtherUid) +
                        " in a directory others can write");
  // Or for a second name of it (a hard link, where fs.protected_hardlinks is off: made here as
  // root on their behalf).
  REQUIRE(::unlink(image.c_str()) == 0);
  REQUIRE(::link(secret.c_str(), image.c_str()) == 0);
  r = job.repo.Wb({"snapshot", image});
  CheckOneLineError(r, 2, image + " is a file of uid 0 with 2 names in " + theirs);
  // Or a file of root's that was in their directory anyway, renamed into the image's place.
  REQUIRE(::unlink(image.c_str()) == 0);
  const std::string roots = theirs + "/root-only.img";
  REQUIRE(std::filesystem::copy_file(secret, roots));
  REQUIRE(::chmod(roots.c_str(), 0600) == 0);
  REQUIRE(AsOtherUser([&] { return ::rename(roots.c_str(), image.c_str()) == 0; }));
  r = job.repo.Wb({"snapshot", image});
  CheckOneLineError(r, 2,
                    image + " is a file of uid 0 in " + theirs +
                        ", which another user can change (owned by uid " +
                        std::to_string(kOtherUid) + ")");
  CHECK(state() == before);
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

TEST_CASE("key change: a repository's own file is refused as the new passphrase file",
          "[rootfiles]") {
  RootJob job;
  const std::string config_json = job.repo.path() + "/config.json";
  const std::string before = Contents(config_json);
  for (const std::string& file : {config_json, job.repo.path() + "/./catalog.db"}) {
    INFO(file);
    const RunResult r = job.repo.Wb({"key", "change", "--new-password-file", file});
    CHECK(r.exit_code == 2);
    CHECK(r.err == "wanbackup: error: --new-password-file " + file +
                       " is a file of a repository, not a passphrase file. Nothing was changed\n");
  }
  CHECK(Contents(config_json) == before);
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
