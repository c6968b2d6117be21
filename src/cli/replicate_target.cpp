#include "cli/replicate_target.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/console.h"
#include "cli/internal/json_text.h"
#include "cli/internal/sink_json.h"
#include "cli/progress.h"
#include "cli/sink_open.h"
#include "cli/source_open.h"
#include "cli/write_target.h"
#include "common/pacing.h"
#include "common/safe_path.h"
#include "common/text.h"
#include "common/unique_fd.h"
#include "common/units.h"
#include "initiator/iscsi_url.h"

namespace wanbackup::cli {
namespace {

// The LUN an iSCSI URL names, as "IQN/LUN", in the identity the replicas table records.
std::string LunName(const std::string& spec) {
  Result<initiator::IscsiUrl> url = initiator::ParseIscsiUrl(spec);
  if (!url.ok() || !url->lun) return "";
  return url->target + "/" + std::to_string(*url->lun);
}

// The first line of a sysfs attribute, or "" when there is none.
std::string SysfsLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\n'))
    line.pop_back();
  return line;
}

// A block device's identity that survives reboots and renumbering: the device-mapper UUID (LVM,
// multipath), else the disk's WWID or serial (a partition: its disk's, and its number); "" when
// the kernel knows none.
std::string StableBlockId(dev_t rdev) {
  const std::string dir =
      "/sys/dev/block/" + std::to_string(major(rdev)) + ":" + std::to_string(minor(rdev));
  if (std::string uuid = SysfsLine(dir + "/dm/uuid"); !uuid.empty()) return "dm-uuid=" + uuid;
  const std::string partition = SysfsLine(dir + "/partition");
  const std::string disk = partition.empty() ? dir : dir + "/..";
  for (const char* attr : {"/wwid", "/device/wwid", "/device/serial", "/serial"}) {
    if (std::string id = SysfsLine(disk + attr); !id.empty()) {
      return std::string(attr + (attr[1] == 'd' ? 8 : 1)) + "=" + id +
             (partition.empty() ? "" : " part=" + partition);
    }
  }
  return "";
}

struct TargetId {
  std::string identity;     // the replicas row it is
  std::string fingerprint;  // what it looks like now ("": no stable identity)
};

std::string FileFingerprint(const struct stat& st) {
  return "size=" + std::to_string(st.st_size) + " mtime=" + std::to_string(st.st_mtim.tv_sec) +
         "." + std::to_string(st.st_mtim.tv_nsec);
}

Result<TargetId> LocalIdentity(const std::string& to, const struct stat& st);

// What makes the replica the same one next time, whatever name the user gives it, and what it
// looks like now.
Result<TargetId> Identify(const std::string& to, const OpenedSink& opened) {
  if (opened.lun != nullptr) {
    const initiator::LunInfo& lun = opened.lun->lun();
    const std::string id = lun.identifier.empty() ? lun.serial : lun.identifier;
    const std::string name = "iscsi:" + LunName(to);
    if (id.empty()) return TargetId{name, ""};
    return TargetId{name + ":" + id, "blocks=" + std::to_string(lun.block_count) + "x" +
                                         std::to_string(lun.block_size) + " id=" + id};
  }
  struct stat st {};
  if (::stat(to.c_str(), &st) != 0) return Status::FromErrno(errno, "cannot stat " + to);
  return LocalIdentity(to, st);
}

// The same for a local file or block device whose stat is `st`.
Result<TargetId> LocalIdentity(const std::string& to, const struct stat& st) {
  if (S_ISBLK(st.st_mode)) {
    const std::string stable = StableBlockId(st.st_rdev);
    const std::string numbers =
        "block:" + std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
    if (stable.empty()) return TargetId{numbers, ""};
    return TargetId{"block:" + stable, stable};
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(to +
                                   " is neither a regular file, a block device nor a LUN; "
                                   "a replica must be one of those");
  }
  return TargetId{"file:" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino),
                  FileFingerprint(st)};
}

nlohmann::json SummaryJson(const catalog::SnapshotInfo& snap, const catalog::Replica& replica,
                           const OpenedSink& opened, const pipeline::ReplicateResult& result) {
  const double secs = std::chrono::duration<double>(result.elapsed).count();
  nlohmann::json j = {{"snapshot", snap.id},
                      {"replica", replica.id},
                      {"target", replica.target},
                      {"mode", pipeline::ReplicateModeName(result.plan.mode)},
                      {"reason", result.plan.reason},
                      {"base_snapshot", result.plan.base_snapshot},
                      {"chunks_total", result.chunks_total},
                      {"chunks_written", result.chunks_written},
                      {"bytes_total", snap.size_bytes},
                      {"bytes_written", result.bytes_written},
                      {"bytes_read", result.bytes_read},
                      {"seconds", secs}};
  const uint64_t written = j["bytes_written"];
  internal::AddLunStats(opened, &j);  // a LUN: what went over the wire
  j["bytes_written"] = written;       // the chunks replicate wrote (the same, for a LUN)
  return j;
}

// Whether `path`'s directory is on the filesystem of /dev itself (devtmpfs), not on one mounted
// below it. A directory that does not exist counts as the device filesystem's.
bool InDeviceFilesystem(const std::string& path) {
  struct stat dev {};
  struct stat dir {};
  const std::string parent = std::filesystem::path(path).parent_path().string();
  if (::stat("/dev", &dev) != 0 || ::stat(parent.c_str(), &dir) != 0) return true;
  return dir.st_dev == dev.st_dev;
}

// Opens the replica for writing and says what it is: whether it was just created, its identity
// and fingerprint (into `options` and `id`). A short file is extended to the snapshot's size
// first, so that it can be read back and compared.
Result<OpenedSink> OpenReplica(const catalog::SnapshotInfo& snap, const ReplicateRequest& request,
                               pipeline::ReplicateOptions* options, TargetId* id) {
  // A missing path in the device directory is a device that is not there (an inactive LV, a
  // lost disk), never a file to create there. A filesystem mounted under /dev (/dev/shm) holds
  // files like any other.
  struct stat st {};
  if (!initiator::LooksLikeIscsiUrl(request.to) && request.to.rfind("/dev/", 0) == 0 &&
      ::stat(request.to.c_str(), &st) != 0) {
    const int missing = errno;  // before InDeviceFilesystem's own stat calls
    if (InDeviceFilesystem(request.to)) {
      return Status::FromErrno(missing, request.to +
                                            " is not there (a device that is not "
                                            "attached or active?); nothing was written");
    }
  }
  WB_ASSIGN_OR_RETURN(OpenedSink opened,
                      OpenSink(request.to, snap.size_bytes, ExistingFile::kInPlace, request.target,
                               request.tuning));
  options->target_new = opened.created;
  if (!options->target_new && opened.lun == nullptr && ::stat(request.to.c_str(), &st) == 0 &&
      S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) < snap.size_bytes &&
      ::truncate(request.to.c_str(), static_cast<off_t>(snap.size_bytes)) != 0) {
    // A short file (a first run that was killed, a source that grew): read back as zeros.
    return Status::FromErrno(errno, "cannot extend " + request.to);
  }
  WB_ASSIGN_OR_RETURN(*id, Identify(request.to, opened));
  options->fingerprint = id->fingerprint;
  if (opened.lun == nullptr && id->identity.rfind("file:", 0) == 0) {
    const std::string path = request.to;
    options->final_fingerprint = [path, before = id->fingerprint] {
      struct stat now {};
      return ::stat(path.c_str(), &now) == 0 ? FileFingerprint(now) : before;
    };
  }
  return opened;
}

// Whether the block device `path` holds data: its first or last MiB (where partition tables,
// filesystem and LVM labels live) is not zeros, as copy asks of a LUN.
Result<bool> DeviceHoldsData(const std::string& path) {
  constexpr uint64_t kEdge = 1 << 20;
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(errno, "cannot open " + path);
  uint64_t size = 0;
  if (::ioctl(fd.get(), BLKGETSIZE64, &size) != 0) {
    return Status::FromErrno(errno, "cannot read the size of " + path);
  }
  const uint64_t edge = std::min(size, kEdge);
  std::vector<uint8_t> buf(edge);
  for (const uint64_t at : {uint64_t{0}, size - edge}) {
    size_t done = 0;
    while (done < edge) {
      const ssize_t n =
          ::pread(fd.get(), buf.data() + done, edge - done, static_cast<off_t>(at + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::FromErrno(n < 0 ? errno : EIO, "reading " + path);
      done += static_cast<size_t>(n);
    }
    if (std::any_of(buf.begin(), buf.end(), [](uint8_t c) { return c != 0; })) return true;
  }
  return false;
}

// AlreadyExists, unless --force, when the local target exists and is no replica this repository
// records (one of another series the guard has refused already): a file, or a block device that
// holds data, is something the user has not yet made a replica; restore and copy ask the same.
Status RefuseUnrecordedTarget(pipeline::Repository& repo, const ReplicateRequest& request) {
  if (initiator::LooksLikeIscsiUrl(request.to)) return Status::Ok();
  // A link another user planted is refused first, --force or not (the sink's open says why).
  Result<ResolvedPath> where = ResolveForWriting(request.to, PathPolicy::kNoPlantedLinks);
  if (!where.ok())
    return where.status().code() == StatusCode::kInvalidArgument
               ? where.status()
               : Status::Ok();  // the open names what is missing
  struct stat st {};
  if (request.force || ::fstatat(where->dir.get(), where->name.c_str(), &st, 0) != 0 ||
      !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))) {
    return Status::Ok();
  }
  WB_ASSIGN_OR_RETURN(const TargetId id, LocalIdentity(request.to, st));
  WB_ASSIGN_OR_RETURN(std::optional<catalog::Replica> known,
                      repo.catalog().FindReplica(id.identity));
  if (known) return Status::Ok();
  std::string what = request.to + " exists";
  if (S_ISBLK(st.st_mode)) {
    WB_ASSIGN_OR_RETURN(const bool data, DeviceHoldsData(request.to));
    if (!data) return Status::Ok();
    what = request.to + " holds data (its first or last MiB is not zeros)";
  }
  return Status::AlreadyExists(what +
                               " and is no replica this repository records; 'wanbackup replicate "
                               "SNAPSHOT --repo " +
                               ShellWord(repo.path()) + " --to " + ShellWord(request.to) +
                               " --force' makes it one, for a job's replicate_to too (the first "
                               "run compares every chunk). Nothing was written");
}

// The write guard, asked before the replica is opened (no byte written, no login).
Status RefuseReplicaTarget(pipeline::Repository& repo, const catalog::SnapshotInfo& snap,
                           const ReplicateRequest& request) {
  WriteTarget target;
  target.to = request.to;
  target.repo = &repo;
  target.holds_writer_lock = true;  // REQUIRES of ReplicateSnapshot
  target.config = request.config;
  target.replicate_source = snap.source;  // its own series' replicas may be written
  target.credential_files = request.credential_files;
  return RefuseWriteTarget(target);
}

}  // namespace

Result<ReplicateOutcome> ReplicateSnapshot(pipeline::Repository& repo,
                                           const catalog::SnapshotInfo& snap,
                                           const ReplicateRequest& request) {
  WB_ASSIGN_OR_RETURN(const uint64_t rate, LimitRate(request.tuning));  // before any login
  if (request.to == "-") {
    return Status::InvalidArgument("a replica is a LUN, block device or file, not stdout");
  }
  WB_RETURN_IF_ERROR(RefuseReplicaTarget(repo, snap, request));
  WB_RETURN_IF_ERROR(RefuseUnrecordedTarget(repo, request));
  pipeline::ReplicateOptions options;
  options.check = request.check;
  TargetId id;
  WB_ASSIGN_OR_RETURN(OpenedSink opened, OpenReplica(snap, request, &options, &id));
  WB_ASSIGN_OR_RETURN(std::optional<catalog::Replica> known,
                      repo.catalog().FindReplica(id.identity));
  ReplicateOutcome out;
  out.replica = known.value_or(catalog::Replica{});
  out.replica.identity = id.identity;
  out.replica.target = opened.sink->name();
  if (rate > 0) {
    opened.tuning_explanation += "; the average held to " + FormatRate(static_cast<double>(rate));
    opened.sink =
        std::make_unique<PacedSink>(std::move(opened.sink), std::make_shared<Pacer>(rate));
  }
  if (opened.lun != nullptr) {
    PrintInfo("writing " + out.replica.target + ": " + opened.tuning_explanation);
  }
  options.open_readback = [&request]() -> Result<std::unique_ptr<BlockSource>> {
    WB_ASSIGN_OR_RETURN(OpenedSource source, OpenSource(request.to, request.target, request.tuning,
                                                        SourceUse::kReadBack));
    return std::move(source.source);
  };
  WB_ASSIGN_OR_RETURN(pipeline::ReplicatePlan plan,
                      pipeline::PlanReplicate(repo, snap, out.replica, options));
  PrintInfo("replica " + out.replica.target + ": " + plan.reason);

  ProgressLine progress(request.progress);
  options.restore.record_checked = true;
  options.restore.on_progress = [&progress](const pipeline::RestoreProgress& p) {
    progress.Update(FormatBytes(p.bytes_done) + " / " + FormatBytes(p.bytes_total));
  };
  Result<pipeline::ReplicateResult> result =
      pipeline::Replicate(repo, snap, &out.replica, *opened.sink, options);
  progress.Clear();
  if (!result.ok()) {
    return result.status().WithContext(
        "replicate to " + out.replica.target +
        (out.replica.writing_snapshot_id != 0
             ? " stopped; it is inconsistent until a replicate finishes"
             : " stopped before writing anything"));
  }
  out.result = *result;
  out.json = JsonText(SummaryJson(snap, out.replica, opened, out.result));
  out.summary = "replica " + out.replica.target + " is at snapshot " + std::to_string(snap.id) +
                ": wrote " + std::to_string(result->chunks_written) + " of " +
                std::to_string(result->chunks_total) + " chunks (" +
                FormatBytes(result->bytes_written) + ")" +
                (result->bytes_read > 0 ? ", read " + FormatBytes(result->bytes_read) : "") +
                " in " + FormatDuration(result->elapsed);
  return out;
}

Status RefuseRecordedReplica(pipeline::Repository& repo, const std::string& to,
                             const OpenedSink& opened) {
  if (opened.created) return Status::Ok();
  Result<TargetId> id = Identify(to, opened);
  if (!id.ok()) return Status::Ok();  // neither file, device nor LUN: never a replica
  WB_ASSIGN_OR_RETURN(std::optional<catalog::Replica> known,
                      repo.catalog().FindReplica(id->identity));
  if (!known) return Status::Ok();
  const std::string n = std::to_string(known->id);
  return Status::InvalidArgument(
      to + " is replica " + n + " of this repository: bring it to a snapshot with 'wanbackup " +
      "replicate SNAPSHOT --to " + to + "' (it writes only what differs), or drop its record " +
      "first with 'wanbackup replicas --forget " + n + "'. Nothing was written");
}

void WarnReplicasLosingBase(pipeline::Repository& repo, const std::vector<int64_t>& forgotten,
                            bool dry_run) {
  Result<std::vector<catalog::Replica>> replicas = repo.catalog().Replicas();
  if (!replicas.ok()) return;
  for (const catalog::Replica& r : *replicas) {
    if (!std::binary_search(forgotten.begin(), forgotten.end(), r.snapshot_id)) continue;
    PrintWarning("replica " + std::to_string(r.id) + " (" + r.target + ") holds snapshot " +
                 std::to_string(r.snapshot_id) + ", which " + (dry_run ? "would be" : "is") +
                 " forgotten: its next replicate reads it whole to compare (keep the snapshot "
                 "a replica holds, or replicate a newer one first)");
  }
}

}  // namespace wanbackup::cli
