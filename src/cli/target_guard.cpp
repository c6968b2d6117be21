#include "cli/target_guard.h"

#include <sys/stat.h>

#include <vector>

#include "initiator/iscsi_url.h"
#include "pipeline/repo_lock.h"

namespace wanbackup::cli {
namespace {

// The same device, whatever it was called: a LUN by IQN + LUN, or a local path by what it
// resolves to.
bool SameTarget(const std::string& a, const std::string& b) {
  const bool a_lun = initiator::LooksLikeIscsiUrl(a), b_lun = initiator::LooksLikeIscsiUrl(b);
  if (a_lun || b_lun) return a_lun && b_lun && !LunName(a).empty() && LunName(a) == LunName(b);
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return a == b;
  if (S_ISBLK(sa.st_mode) && S_ISBLK(sb.st_mode)) return sa.st_rdev == sb.st_rdev;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

std::string LunName(const std::string& spec) {
  Result<initiator::IscsiUrl> url = initiator::ParseIscsiUrl(spec);
  if (!url.ok() || !url->lun) return "";
  return url->target + "/" + std::to_string(*url->lun);
}

Status RefuseSourceOf(pipeline::Repository& repo, const std::string& to, SourceRule rule) {
  WB_ASSIGN_OR_RETURN(std::vector<catalog::SnapshotInfo> all, repo.catalog().Snapshots(true));
  for (const catalog::SnapshotInfo& s : all) {
    if (!SameTarget(s.source, to)) continue;
    // A failed run (a mistyped source, killed) does not make a disk a source: forget cannot
    // drop its row, and it would bar the disk for good.
    if (rule == SourceRule::kAnySnapshot && s.status == catalog::SnapshotStatus::kComplete) {
      return Status::InvalidArgument(
          to + " is the source of snapshot " + std::to_string(s.id) +
          ": replicate writes a standby copy, never a disk this repository backs up (to "
          "overwrite it anyway, 'wanbackup restore'). Nothing was written");
    }
    // replicate holds the writer lock a running snapshot would need: its running rows are stale
    // (and the probe would see replicate's own lock).
    if (rule == SourceRule::kRunning && s.status == catalog::SnapshotStatus::kRunning &&
        pipeline::WriterRunning(repo.path())) {
      return Status::InvalidArgument(to + " is the source of snapshot " + std::to_string(s.id) +
                                     ", running now; wait for it to finish. Nothing was written");
    }
  }
  return Status::Ok();
}

}  // namespace wanbackup::cli
