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

Status RefuseSourceOf(pipeline::Repository& repo, const std::string& to, int64_t snapshot_id,
                      bool check_running) {
  WB_ASSIGN_OR_RETURN(std::vector<catalog::SnapshotInfo> all, repo.catalog().Snapshots(true));
  for (const catalog::SnapshotInfo& s : all) {
    const bool running = check_running && s.status == catalog::SnapshotStatus::kRunning &&
                         SameTarget(s.source, to) && pipeline::WriterRunning(repo.path());
    if ((s.id == snapshot_id && SameTarget(s.source, to)) || running) {
      return Status::InvalidArgument(
          to + " is the source of snapshot " + std::to_string(s.id) +
          (running ? ", running now" : "") +
          (running ? "; wait for it to finish. Nothing was written"
                   : "; replicate writes a standby copy, never the disk it backs up. Nothing "
                     "was written"));
    }
  }
  return Status::Ok();
}

}  // namespace wanbackup::cli
