#include "cli/write_target.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "guard/identity.h"
#include "guard/write_guard.h"
#include "repository/repo_lock.h"
#include "repository/trust_anchor.h"
#include "store/s3_pack_store.h"

namespace wanbackup::cli {
namespace {

constexpr char kOnlyOwnSource[] =
    "--overwrite-source rolls back only the restored snapshot's own source";

// What a snapshot's source is, looked up once per name however many snapshots share it.
class SourceIdentities {
 public:
  const guard::Identity& Of(const std::string& source) {
    auto [it, added] = known_.try_emplace(source);
    if (added) it->second = guard::Identify(source);
    return it->second;
  }

 private:
  std::map<std::string, guard::Identity> known_;
};

guard::Protected SnapshotSource(const guard::Identity& source, std::string what, bool overridable,
                                std::string hint) {
  guard::Protected p;
  p.rule = guard::Rule::kSnapshotSource;
  p.identity = source;
  p.what = std::move(what);
  p.overridable = overridable;
  p.hint = std::move(hint);
  return p;
}

// The sources of the repository's snapshots: complete ones, and ones running now (a "running"
// row counts only while another process holds the writer lock: a killed run leaves its row).
// A failed run does not make a disk a source: forget cannot drop its row. A command that holds
// the writer lock itself (replicate) knows every running row is stale.
// `restored`: restore --overwrite-source may write the source of the snapshot it restores (the
// disk of that series, by identity), never another series' source.
Status AddSnapshotSources(pipeline::Repository& repo, bool holds_writer_lock,
                          const std::optional<guard::Identity>& restored,
                          std::vector<guard::Protected>* protect) {
  WB_ASSIGN_OR_RETURN(std::vector<catalog::SnapshotInfo> all, repo.catalog().Snapshots(true));
  std::optional<bool> writer;  // asked only when a running row needs the answer (repo_lock.h)
  SourceIdentities sources;
  for (const catalog::SnapshotInfo& s : all) {
    bool running = false;
    if (s.status == catalog::SnapshotStatus::kRunning && !holds_writer_lock) {
      if (!writer) writer = pipeline::WriterRunning(repo.path());
      running = *writer;
    }
    if (s.status != catalog::SnapshotStatus::kComplete && !running) continue;
    const guard::Identity& source = sources.Of(s.source);
    protect->push_back(SnapshotSource(
        source, "the source of snapshot " + std::to_string(s.id) + (running ? ", running now" : ""),
        !running && restored && guard::Same(source, *restored),
        running    ? "wait for it to finish"
        : restored ? kOnlyOwnSource
                   : "a replica is a standby copy, never a disk this repository backs up (to "
                     "roll that disk back, 'wanbackup restore --overwrite-source')"));
  }
  return Status::Ok();
}

// The replicas the repository records, each by what it is now (a file by the inode recorded
// when it was written, so a renamed one is still known) and the series it holds.
Status AddReplicas(pipeline::Repository& repo, std::vector<guard::Protected>* protect) {
  WB_ASSIGN_OR_RETURN(std::vector<catalog::Replica> replicas, repo.catalog().Replicas());
  if (replicas.empty()) return Status::Ok();
  WB_ASSIGN_OR_RETURN(std::vector<catalog::SnapshotInfo> all, repo.catalog().Snapshots(true));
  std::map<int64_t, std::string> source;
  for (const catalog::SnapshotInfo& s : all)
    source[s.id] = s.source;
  for (const catalog::Replica& r : replicas) {
    guard::Protected p;
    p.rule = guard::Rule::kReplica;
    p.identity = guard::Identify(r.target);
    unsigned long long dev = 0, ino = 0;
    if (std::sscanf(r.identity.c_str(), "file:%llu:%llu", &dev, &ino) == 2) {
      p.identity.kind = guard::Identity::Kind::kPath;
      p.identity.exists = true;
      p.identity.file = guard::FileId{dev, ino};
    }
    const int64_t held = r.writing_snapshot_id != 0 ? r.writing_snapshot_id : r.snapshot_id;
    if (source.count(held) != 0) p.series = guard::Identify(source[held]);
    const std::string n = std::to_string(r.id);
    p.what = "replica " + n + " of repository " + repo.path();
    p.hint = "bring it to a snapshot with 'wanbackup replicate SNAPSHOT --to " + r.target +
             "' (it writes only what differs), or drop its record first with 'wanbackup "
             "replicas --forget " +
             n + "'";
    protect->push_back(p);
  }
  return Status::Ok();
}

// The repositories this client has opened (the locations in its trust anchors,
// repository/trust_anchor.h) other than `except`: their files, and the sources of their complete
// snapshots. A command knows only its own repository, and `copy` none, but a disk another
// repository backs up is no place to write either. Best effort: a location that is gone, or a
// catalog that cannot be read, adds what it can and is never an error.
// `restored`: as for AddSnapshotSources (the same disk backed up to two repositories may be
// rolled back from either).
// Another repository's catalog, read without waiting and without changing anything there. While
// a reader (a mount, a long restore) has it open, SQLite cannot checkpoint, and the newest
// snapshots are only in its -wal, which the immutable glance (Catalog::Peek) does not read: then
// it is opened read-only, with its WAL.
Result<std::unique_ptr<catalog::Catalog>> Glance(const std::string& catalog_path) {
  struct stat st {};
  if (::lstat((catalog_path + "-wal").c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    Result<std::unique_ptr<catalog::Catalog>> cat = catalog::Catalog::OpenReadOnly(catalog_path);
    if (cat.ok()) return cat;
  }
  return catalog::Catalog::Peek(catalog_path);
}

void AddKnownRepositories(const std::string& except, const guard::Identity& to,
                          const std::optional<guard::Identity>& restored,
                          std::vector<guard::Protected>* protect) {
  const Result<std::vector<pipeline::AnchorRecord>> anchors =
      pipeline::TrustAnchorStore(pipeline::DefaultSecurityDir()).All();
  if (!anchors.ok()) return;
  std::set<std::string> seen;
  if (char* real = ::realpath(except.c_str(), nullptr); real != nullptr) {
    seen.insert(real);
    std::free(real);
  }
  for (const pipeline::AnchorRecord& anchor : *anchors) {
    for (const std::string& location : anchor.locations) {
      struct stat st {};
      if (!seen.insert(location).second || ::stat((location + "/config.json").c_str(), &st) != 0) {
        continue;
      }
      guard::AddRepository(location, to, protect);
      Result<std::unique_ptr<catalog::Catalog>> cat = Glance(location + "/catalog.db");
      if (!cat.ok()) continue;
      const Result<std::vector<catalog::SnapshotInfo>> snapshots = (*cat)->Snapshots(true);
      if (!snapshots.ok()) continue;
      SourceIdentities sources;
      std::optional<bool> writer;  // asked only when a running row needs the answer
      for (const catalog::SnapshotInfo& s : *snapshots) {
        bool running = false;
        if (s.status == catalog::SnapshotStatus::kRunning) {
          if (!writer) writer = pipeline::WriterRunning(location);
          running = *writer;
        }
        if (s.status != catalog::SnapshotStatus::kComplete && !running) continue;
        const guard::Identity& source = sources.Of(s.source);
        protect->push_back(SnapshotSource(
            source,
            "the source of snapshot " + std::to_string(s.id) + (running ? ", running now," : "") +
                " of repository " + location,
            !running && restored && guard::Same(source, *restored),
            running    ? "wait for it to finish"
            : restored ? kOnlyOwnSource
                       : "a disk another repository backs up is never a destination"));
      }
    }
  }
}

// What standard output is, for the destination "-": a file or device opened for it (`1<>file`
// and `>>file` do not truncate before wanbackup starts) by its inode or device number; a pipe
// or terminal is nothing the guard protects.
guard::Identity StandardOutput() {
  struct stat st {};
  if (::fstat(STDOUT_FILENO, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))) {
    guard::Identity pipe;
    pipe.spelling = "-";
    return pipe;
  }
  guard::Identity id = guard::Identify("/proc/self/fd/1");  // its path and directories
  id.exists = true;
  id.file = guard::FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  if (S_ISBLK(st.st_mode)) {
    id.kind = guard::Identity::Kind::kBlock;
    id.rdev = static_cast<uint64_t>(st.st_rdev);
  } else {
    id.kind = guard::Identity::Kind::kPath;
    id.links = static_cast<uint64_t>(st.st_nlink);
  }
  return id;
}

// The files a command and the client need and nobody may write over: the credential files
// given (flags and environment), and the trust anchor directory (repository/trust_anchor.h).
void AddClientFiles(const WriteTarget& target, std::vector<guard::Protected>* protect) {
  std::vector<std::string> files = target.credential_files;
  for (const char* var :
       {"WANBACKUP_KEY_FILE", "WANBACKUP_PASSWORD_FILE", "WANBACKUP_NEW_PASSWORD_FILE",
        "WANBACKUP_CHAP_SECRET_FILE", pipeline::kS3CredentialsFileEnv}) {
    if (const char* value = std::getenv(var); value != nullptr && *value != '\0') {
      files.emplace_back(value);
    }
  }
  for (const std::string& file : files) {
    if (file.empty() || file == "-") continue;
    guard::Protected p;
    p.rule = guard::Rule::kNamedFile;
    p.identity = guard::Identify(file);
    p.what = "a credential file this command uses (" + file + ")";
    protect->push_back(p);
  }
  jobs::AddTrustAnchorDirectory(protect);
}

}  // namespace

std::vector<std::string> CredentialFiles(const RepoFlags& flags, const TargetFlags& target) {
  const RepoFlags resolved = WithEnvironment(flags);
  return {resolved.key_file, resolved.password_file, target.chap_secret_file,
          target.target_chap_secret_file};
}

Status RefuseWriteTarget(const WriteTarget& target) {
  guard::Destination dest;
  dest.name = target.to == "-" ? "standard output" : target.to;
  dest.identity = target.to == "-" ? StandardOutput() : guard::Identify(target.to);
  dest.overwrite_source = target.overwrite_source;
  guard::FindLoopDevices(&dest.identity);
  if (!target.replicate_source.empty()) {
    dest.replicate_series = guard::Identify(target.replicate_source);
  }
  std::vector<guard::Protected> protect;
  if (target.repo != nullptr) guard::AddRepository(target.repo->path(), dest.identity, &protect);
  guard::AddRepositoriesHolding(dest.identity, &protect);  // any other one, named or not
  if (target.config != nullptr) jobs::AddProtected(*target.config, dest.identity, &protect);
  if (!target.copy_source.empty()) {
    guard::Protected source;
    source.rule = guard::Rule::kJobSource;
    source.identity = guard::Identify(target.copy_source);
    source.what = "the source of this copy";
    protect.push_back(source);
  }
  std::optional<guard::Identity> restored;
  if (target.overwrite_source) restored = guard::Identify(target.restored_source);
  if (target.repo != nullptr) {
    WB_RETURN_IF_ERROR(
        AddSnapshotSources(*target.repo, target.holds_writer_lock, restored, &protect));
    WB_RETURN_IF_ERROR(AddReplicas(*target.repo, &protect));
  }
  AddClientFiles(target, &protect);
  AddKnownRepositories(target.repo != nullptr ? target.repo->path() : "", dest.identity, restored,
                       &protect);
  guard::ResolveHosts(&dest, &protect);
  WB_RETURN_IF_ERROR(guard::CheckDeviceName(dest));
  return guard::CheckWriteTarget(dest, protect);
}

}  // namespace wanbackup::cli
