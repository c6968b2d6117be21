#include "initiator/iscsi_source.h"

#include <algorithm>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "initiator/internal/connection.h"
#include "initiator/internal/iscsi_transport.h"
#include "initiator/internal/lun_query.h"
#include "initiator/internal/read_engine.h"

namespace wanbackup::initiator {
namespace {

using internal::Connection;

// The round trip as a READ sees it: the fastest of a few TEST UNIT READYs (no data, so only the
// network and the target's command handling).
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

Result<std::unique_ptr<IscsiSource>> IscsiSource::Open(IscsiSourceOptions options) {
  if (options.connection.target.empty()) {
    return Status::InvalidArgument("reading needs a target and LUN: iscsi://host/target-iqn/lun");
  }
  WB_ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn, Connection::Open(options.connection));
  WB_ASSIGN_OR_RETURN(LunInfo lun, internal::QueryLun(*conn, options.lun));
  if (!lun.is_disk()) {
    return Status::Unsupported("LUN " + std::to_string(options.lun) + " of " +
                               options.connection.target + " is a " + lun.device_type +
                               ", not a disk");
  }
  if (lun.block_count == 0) {
    return Status::Unsupported("LUN " + std::to_string(options.lun) + " is empty");
  }
  // The kernel has timed the login's round trips already; ask TEST UNIT READY only if not.
  std::chrono::nanoseconds rtt = conn->MinRtt();
  if (rtt.count() == 0) {
    WB_ASSIGN_OR_RETURN(rtt, MeasureRtt(*conn, options.lun, 3));
  }

  TuningRequest tuning = options.tuning;
  tuning.rtt = rtt;
  tuning.block_size = lun.block_size;
  tuning.lun_size = lun.size_bytes();
  tuning.max_transfer_bytes = uint64_t{lun.max_transfer_blocks} * lun.block_size;
  TuningPlan plan = PlanTransfer(tuning);

  internal::ReadEngineConfig config;
  IscsiUrl url;
  url.host = options.connection.host;
  url.port = options.connection.port;
  url.target = options.connection.target;
  url.lun = options.lun;
  config.geometry.name = url.ToDisplayString();
  config.geometry.size_bytes = lun.size_bytes();
  config.geometry.block_size = lun.block_size;
  config.negotiated = conn->negotiated();
  config.rtt = rtt;
  config.plan = std::move(plan);
  config.retry_timeout = options.retry_timeout;
  config.lun = lun;
  auto transport = std::make_unique<internal::IscsiTransport>(options.connection.Clone(),
                                                              std::move(lun), std::move(conn));
  auto engine = std::make_unique<internal::ReadEngine>(std::move(transport), std::move(config));
  engine->Start();
  return std::unique_ptr<IscsiSource>(std::move(engine));
}

}  // namespace wanbackup::initiator
