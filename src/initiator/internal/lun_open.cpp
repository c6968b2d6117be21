#include "initiator/internal/lun_open.h"

#include <algorithm>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "initiator/internal/lun_query.h"

namespace wanbackup::initiator::internal {
namespace {

// The round trip as a command sees it: the fastest of a few TEST UNIT READYs (no data, so only
// the network and the target's command handling).
Result<std::chrono::nanoseconds> MeasureRtt(Connection& conn, int lun, int samples) {
  auto best = std::chrono::nanoseconds::max();
  for (int i = 0; i < samples; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto task =
        conn.Execute([lun](iscsi_context* iscsi, auto cb,
                           void* data) { return iscsi_testunitready_task(iscsi, lun, cb, data); },
                     "TEST UNIT READY");
    if (!task.ok()) return task.status();
    best = std::min<std::chrono::nanoseconds>(best, std::chrono::steady_clock::now() - start);
  }
  return best;
}

}  // namespace

Result<OpenedLun> OpenDiskLun(const ConnectionOptions& options, int lun, const std::string& what) {
  if (options.target.empty()) {
    return Status::InvalidArgument(what + " needs a target and LUN: iscsi://host/target-iqn/lun");
  }
  OpenedLun opened;
  WB_ASSIGN_OR_RETURN(opened.conn, Connection::Open(options));
  WB_ASSIGN_OR_RETURN(opened.lun, QueryLun(*opened.conn, lun));
  if (!opened.lun.is_disk()) {
    // The LUN exists but the command line named the wrong one: bad input, like a bad URL.
    return Status::InvalidArgument("LUN " + std::to_string(lun) + " of " + options.target +
                                   " is a " + opened.lun.device_type +
                                   ", not a disk; give a disk LUN (wanbackup probe lists them)");
  }
  if (opened.lun.block_count == 0) {
    return Status::Unsupported("LUN " + std::to_string(lun) + " is empty");
  }
  // The kernel has timed the login's round trips already; ask TEST UNIT READY only if not.
  opened.rtt = opened.conn->MinRtt();
  if (opened.rtt.count() == 0) {
    WB_ASSIGN_OR_RETURN(opened.rtt, MeasureRtt(*opened.conn, lun, 3));
  }
  IscsiUrl url;
  url.host = options.host;
  url.port = options.port;
  url.target = options.target;
  url.lun = lun;
  opened.name = url.ToDisplayString();
  return opened;
}

}  // namespace wanbackup::initiator::internal
