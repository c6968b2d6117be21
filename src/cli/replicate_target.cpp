#include "cli/replicate_target.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/console.h"
#include "cli/internal/json_text.h"
#include "cli/internal/sink_json.h"
#include "cli/progress.h"
#include "cli/sink_open.h"
#include "cli/source_open.h"
#include "cli/write_target.h"
#include "common/pacing.h"
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

// The write guard, asked before the replica is opened (no byte written, no login).
Status RefuseReplicaTarget(pipeline::Repository& repo, const catalog::SnapshotInfo& snap,
                           const ReplicateRequest& request) {
  WriteTarget target;
  target.to = request.to;
  target.repo = &repo;
  target.holds_writer_lock = true;  // REQUIRES of ReplicateSnapshot
  target.config = request.config;
  target.replicate_source = snap.source;  // its own series' replicas may be written
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
