// wanbackup mount MOUNTPOINT: every snapshot of a repository as a read-only file system (FUSE),
// each a directory with disk.img and info.json, read on demand.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/repo_flags.h"
#include "cli/target_flags.h"
#include "cli/write_target.h"
#include "common/safe_path.h"
#include "common/units.h"
#include "guard/identity.h"
#include "jobs/config.h"
#include "mount/mount.h"
#include "repository/trust_anchor.h"
#include "store/s3_pack_store.h"

namespace wanbackup::cli {
namespace {

struct MountCommandOptions {
  std::string mountpoint;
  std::string cache_size = "256M";
  int fetchers = 4;
  uint32_t read_ahead = 8;
  bool background = false;
  std::string config;  // --config: the job config whose files the mount must not hide
  RepoFlags repo;
  std::optional<jobs::Config> jobs;  // that config, loaded (MountConfig)
};

// The job config whose files a mountpoint must not hide (round 5, V5): --config, else
// $WANBACKUP_CONFIG, else the default file. No default file is no config; one that does not
// load is an error when named, a warning for the default (a mount is no job).
Result<std::optional<jobs::Config>> MountConfig(const std::string& flag) {
  const std::string path = jobs::ConfigPath(flag);
  const bool named = !flag.empty() || path != jobs::kDefaultConfigPath;
  struct stat st {};
  if (!named && ::lstat(path.c_str(), &st) != 0 && errno == ENOENT)
    return std::optional<jobs::Config>();
  Result<jobs::Config> loaded = jobs::LoadConfig(path);
  if (loaded.ok()) return std::optional<jobs::Config>(std::move(*loaded));
  if (named) return loaded.status().WithContext("--config");
  // Root's config, which a user who mounts their own repository cannot read: no news for them.
  if (loaded.status().code() == StatusCode::kPermissionDenied && ::geteuid() != 0) {
    return std::optional<jobs::Config>();
  }
  PrintWarning(loaded.status().message() +
               "; its jobs' files are not checked against the mountpoint");
  return std::optional<jobs::Config>();
}

// What of `config` a mountpoint must not hide, as (path, what it is) pairs: the config file,
// its repositories, credential files, job sources, replicas and metrics file. A job whose
// source or replica directory is covered fails at its next run for as long as the mount lasts.
void AddConfigFiles(const jobs::Config& config,
                    std::vector<std::pair<std::string, std::string>>* hidden) {
  const auto add = [hidden](const std::string& path, const std::string& what) {
    // Not an iSCSI LUN or an S3 repository: nothing a mount could hide.
    if (!path.empty() && path != "-" && path.find("://") == std::string::npos) {
      hidden->emplace_back(path, what);
    }
  };
  add(config.path, "the config file " + config.path);
  add(config.metrics_textfile, "the metrics textfile " + config.metrics_textfile);
  for (const auto& [name, repository] : config.repositories) {
    add(repository.path, "repository " + name + " of " + config.path);
    add(repository.key_file, "the key_file of repository " + name);
    add(repository.password_file, "the password_file of repository " + name);
  }
  for (const auto& [name, job] : config.jobs) {
    add(job.source, "the source of job " + name);
    for (const std::string& to : job.replicate_to)
      add(to, "a replica of job " + name);
    add(job.chap_secret_file, "the chap_secret_file of job " + name);
    add(job.target_chap_secret_file, "the target_chap_secret_file of job " + name);
    add(job.replica_chap_secret_file, "the replica_chap_secret_file of job " + name);
  }
}

Result<mount::ReaderOptions> ReaderOptionsOf(const MountCommandOptions& opts) {
  mount::ReaderOptions reader;
  Result<uint64_t> cache = ParseSize(opts.cache_size);
  if (!cache.ok() || *cache < (16u << 20)) {
    return Status::InvalidArgument("--cache-size " + opts.cache_size +
                                   ": want a size of at least 16M (e.g. 256M, 2G)");
  }
  if (opts.fetchers < 1 || opts.fetchers > 64) {
    return Status::InvalidArgument("--fetchers must be from 1 to 64");
  }
  if (opts.read_ahead > 256) return Status::InvalidArgument("--read-ahead must be at most 256");
  reader.cache_bytes = *cache;
  reader.fetch_threads = opts.fetchers;
  reader.read_ahead.max_window = opts.read_ahead;
  reader.read_ahead.initial_window = std::min<uint32_t>(2, opts.read_ahead);
  if (opts.read_ahead == 0) reader.read_ahead.trigger_bytes = UINT64_MAX;
  return reader;
}

void PrintStats(const std::string& mountpoint, const mount::ReaderStats& s) {
  PrintInfo("unmounted " + mountpoint + ": " + std::to_string(s.chunks_fetched) +
            " chunks fetched (" + FormatBytes(s.stored_bytes_read) + " read from packs), " +
            std::to_string(s.zero_chunk_reads) + " reads of all-zero chunks served without I/O, " +
            "cache " + std::to_string(s.cache.hits) + " hits / " + std::to_string(s.cache.misses) +
            " misses, " + std::to_string(s.failed_reads) + " failed reads");
}

// Refusals name the mount, not a write.
Status AsMountRefusal(const Status& refused, const std::string& shown_as,
                      const std::string& mountpoint) {
  if (refused.ok()) return refused;
  std::string text = refused.message();
  for (size_t at = 0; !shown_as.empty() && (at = text.find(shown_as, at)) != std::string::npos;
       at += mountpoint.size()) {
    text.replace(at, shown_as.size(), mountpoint);
  }
  const std::string written = "Nothing was written";
  if (const size_t at = text.rfind(written); at != std::string::npos) {
    text.replace(at, written.size(), "Nothing was mounted");
  }
  return Status(refused.code(), "mountpoint " + text);
}

// The mountpoint directory, reached as a destination is (common/safe_path.h, kTrusted): no link
// another user could have planted is followed, and every directory on the way, the mountpoint
// too, is root's or this user's and not writable by group or others unless sticky. The mount
// goes on the descriptor, so whatever the path names afterwards is not what gets covered.
// `*resolved`: its path, symlinks resolved.
Result<UniqueFd> OpenMountpointDirectory(const std::string& mountpoint, std::string* resolved) {
  // Resolving a name inside it walks into the mountpoint itself as a directory on the way
  // (`.`, `..` and a trailing slash as the kernel takes them); that name is never opened.
  const std::string inside = mountpoint + "/.wanbackup-mountpoint";
  Result<ResolvedPath> at = ResolveForWriting(inside, PathPolicy::kTrusted, LastLink::kKeep);
  if (!at.ok()) return AsMountRefusal(at.status(), inside, mountpoint);
  *resolved = at->dir_path;
  return std::move(at->dir);
}

// InvalidArgument when mounting on `mountpoint` (open: `dir`) would hide what the client needs:
// the repository it serves (a mount inside it is the write guard's, a mount on it or above it
// is refused here: the first read would wait on itself), a repository this client knows, the
// trust anchor directory, or a credential file. And the write guard's rules for a directory:
// no repository's directory, no trust anchor directory.
Status RefuseMountpoint(pipeline::Repository& repo, const MountCommandOptions& opts,
                        const std::string& resolved, int dir) {
  const RepoFlags& flags = opts.repo;
  const std::string& mountpoint = opts.mountpoint;
  WriteTarget target;
  target.to = resolved;
  target.repo = &repo;
  if (opts.jobs) target.config = &*opts.jobs;
  target.credential_files = CredentialFiles(flags, TargetFlags{});
  WB_RETURN_IF_ERROR(AsMountRefusal(RefuseWriteTarget(target), resolved, mountpoint));

  struct stat st {};
  if (::fstat(dir, &st) != 0) return Status::FromErrno(errno, "mountpoint " + mountpoint);
  const guard::FileId covered{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  std::vector<std::pair<std::string, std::string>> hidden = {
      {repo.path(), "the repository it serves, " + repo.path()},
      {pipeline::DefaultSecurityDir(),
       "the trust anchor directory " + pipeline::DefaultSecurityDir()}};
  for (const std::string& file : target.credential_files)
    if (!file.empty() && file != "-") hidden.emplace_back(file, "the credential file " + file);
  for (const char* var :
       {"WANBACKUP_KEY_FILE", "WANBACKUP_PASSWORD_FILE", pipeline::kS3CredentialsFileEnv}) {
    if (const char* value = std::getenv(var); value != nullptr && *value != '\0') {
      hidden.emplace_back(value, std::string("the credential file ") + value);
    }
  }
  if (opts.jobs) AddConfigFiles(*opts.jobs, &hidden);
  if (auto anchors = pipeline::TrustAnchorStore(pipeline::DefaultSecurityDir()).All();
      anchors.ok()) {
    for (const pipeline::AnchorRecord& anchor : *anchors)
      for (const std::string& location : anchor.locations)
        hidden.emplace_back(location, "repository " + location);
  }
  for (const auto& [path, what] : hidden) {
    const guard::Identity id = guard::Identify(path);
    // A path not made yet (a replica's first run) still has its directories to hide.
    if (id.kind != guard::Identity::Kind::kPath) continue;
    const bool is = id.exists && id.file == covered;
    if (!is &&
        std::find(id.directories.begin(), id.directories.end(), covered) == id.directories.end()) {
      continue;
    }
    std::string text = "mountpoint " + mountpoint;
    text += is ? " is " : " holds ";
    text += what;
    text +=
        ", which the mount would hide; choose an empty directory elsewhere. Nothing was mounted";
    return Status::InvalidArgument(text);
  }
  return Status::Ok();
}

// Opens the repository (its reader lock held while mounted), mounts and serves. `notify_fd`
// (>= 0 for --background) gets "K" once mounted; the process then leaves the terminal, and
// *mounted says so.
Status MountAndServe(const MountCommandOptions& opts, int notify_fd, bool* mounted) {
  RepoFlags flags = opts.repo;
  flags.command = "mount " + opts.mountpoint;  // what prune names when the mount holds it back
  WB_ASSIGN_OR_RETURN(mount::ReaderOptions reader, ReaderOptionsOf(opts));
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(flags, pipeline::OpenMode::kRead));
  std::string resolved;
  WB_ASSIGN_OR_RETURN(UniqueFd dir, OpenMountpointDirectory(opts.mountpoint, &resolved));
  WB_RETURN_IF_ERROR(RefuseMountpoint(*repo, opts, resolved, dir.get()));
  WB_ASSIGN_OR_RETURN(std::vector<catalog::SnapshotInfo> snapshots,
                      repo->catalog().Snapshots(false));
  const bool background = notify_fd >= 0;
  const size_t count = snapshots.size();
  reader.log = [background](const std::string& line) {
    if (background) {
      syslog(LOG_ERR, "%s", line.c_str());
    } else {
      PrintError(line);
    }
  };
  mount::MountOptions options;
  options.mountpoint = opts.mountpoint;
  options.mountpoint_fd = dir.get();
  options.reader = reader;
  options.on_mounted = [&, count]() -> Status {
    if (!background) {
      PrintInfo("mounted " + std::to_string(count) + " snapshots of " + repo->path() + " at " +
                opts.mountpoint + "; unmount with Ctrl-C or fusermount3 -u " + opts.mountpoint);
      return Status::Ok();
    }
    openlog("wanbackup-mount", LOG_PID, LOG_DAEMON);
    const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd <= 2 && null_fd >= 0; ++fd)
      ::dup2(null_fd, fd);
    if (null_fd > 2) ::close(null_fd);
    const bool told = ::write(notify_fd, "K", 1) == 1;
    ::close(notify_fd);
    *mounted = true;
    return told ? Status::Ok() : Status::Cancelled("the starting process went away");
  };
  mount::ReaderStats stats;
  Status served = mount::ServeMount(*repo, std::move(snapshots), options, &stats);
  if (!background && served.ok()) PrintStats(opts.mountpoint, stats);
  return served;
}

// --background: the mount runs in a child (which opens the repository, so the reader lock
// and its holder line are the child's); this process waits until it is mounted or failed.
Status MountInBackground(const MountCommandOptions& opts) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  const pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno(errno, "fork");
  if (pid == 0) {
    ::close(fds[0]);
    ::setsid();
    bool mounted = false;
    Status s = MountAndServe(opts, fds[1], &mounted);
    if (!mounted) {  // tell the parent why
      const std::string report = std::to_string(static_cast<int>(s.code())) + "\n" + s.message();
      [[maybe_unused]] const ssize_t n = ::write(fds[1], report.data(), report.size());
      ::_exit(1);
    }
    return s;  // mounted, served, unmounted: this child ends through main
  }
  ::close(fds[1]);
  std::string report;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    report.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (report == "K") {
    PrintInfo("mounted at " + opts.mountpoint + " in the background (pid " + std::to_string(pid) +
              "); unmount with fusermount3 -u " + opts.mountpoint);
    return Status::Ok();
  }
  ::waitpid(pid, nullptr, 0);
  const size_t nl = report.find('\n');
  if (nl == std::string::npos) return Status::Internal("the mount process ended without a word");
  return Status(static_cast<StatusCode>(std::stoi(report.substr(0, nl))), report.substr(nl + 1));
}

Status RunMount(MountCommandOptions opts) {
  // Before any passphrase is asked for: what would stop the mount anyway.
  WB_RETURN_IF_ERROR(mount::CheckCanMount(opts.mountpoint));
  WB_RETURN_IF_ERROR(ReaderOptionsOf(opts).status());
  std::string resolved;  // a planted link is refused before any passphrase too
  WB_RETURN_IF_ERROR(OpenMountpointDirectory(opts.mountpoint, &resolved).status());
  WB_ASSIGN_OR_RETURN(opts.jobs, MountConfig(opts.config));
  return opts.background ? MountInBackground(opts) : MountAndServe(opts, -1, nullptr);
}

}  // namespace

void RegisterMount(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<MountCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "mount", "Open every snapshot as a read-only file system (FUSE), without restoring it");
  cmd->add_option("mountpoint", opts->mountpoint,
                  "an existing directory with nothing mounted on it")
      ->required();
  cmd->add_option("--cache-size", opts->cache_size,
                  "opened chunks kept in memory (default 256M; at least 16M)");
  cmd->add_option("--fetchers", opts->fetchers,
                  "chunks fetched from the packs at once (default 4; 1 to 64)");
  cmd->add_option("--read-ahead", opts->read_ahead,
                  "chunks fetched ahead of a sequential reader, at most (default 8; 0: none)");
  cmd->add_flag("--background", opts->background,
                "detach once mounted (errors then go to syslog); unmount with fusermount3 -u");
  cmd->add_option("-c,--config", opts->config,
                  "the job config whose files the mount must not hide (default: "
                  "$WANBACKUP_CONFIG, else /etc/wanbackup/wanbackup.toml if it exists)");
  AddRepoFlags(cmd, &opts->repo);
  cmd->footer(
      "\nEach snapshot is a directory named by its number, holding disk.img (the LUN's bytes,\n"
      "its exact size) and info.json (source, time, size, block size, tag); 'latest' and each\n"
      "tag name are symlinks to a snapshot's directory. Nothing can be written. A read fetches\n"
      "only the chunks it touches (authenticated and decompressed, as restore does), keeps them\n"
      "in a bounded cache, and fetches ahead while a reader goes sequentially; all-zero chunks\n"
      "cost nothing. A damaged chunk makes the read that touches it fail (EIO), logged with its\n"
      "LBA range: never wrong bytes. The mount holds the repository's reader lock, so prune\n"
      "waits for it (or names it) without holding up snapshots, a job's forget and prune steps\n"
      "are skipped until a run finds it gone, and snapshots taken after mounting appear at the\n"
      "next mount.\n"
      "Runs in the foreground until Ctrl-C, SIGTERM or fusermount3 -u MOUNTPOINT.\n"
      "\nThe mountpoint is reached as restore's destination is: a symlink another user could\n"
      "have planted is not followed, and it and every directory on the way must be root's or\n"
      "yours and not writable by others (unless sticky). A mountpoint in or on a repository,\n"
      "on or above the repository served, a repository this client knows, the trust anchor\n"
      "directory or a key or passphrase file is refused (exit 2): the mount would hide it. So\n"
      "is one over what the job config (--config) names: its file, repositories, credential\n"
      "files, job sources, replicas and metrics file.\n"
      "\nFILE-LEVEL RESTORE (as root):\n"
      "  dev=$(losetup --find --show --read-only --partscan MOUNTPOINT/latest/disk.img)\n"
      "  mount -o ro,noload $dev /mnt/restore      # ext4 (XFS: -o ro,norecovery,nouuid); a\n"
      "                                           # partition of a disk is ${dev}p1 ...\n"
      "  cp -a /mnt/restore/etc/app.conf /srv/; umount /mnt/restore; losetup -d $dev\n"
      "\nEXAMPLES:\n"
      "  wanbackup mount /mnt/backups --repo /backup/db\n"
      "  wanbackup mount /mnt/backups --repo /backup/db --background --cache-size 1G\n"
      "  fusermount3 -u /mnt/backups");
  cmd->callback([opts, runner] { *runner = [opts] { return RunMount(*opts); }; });
}

}  // namespace wanbackup::cli
