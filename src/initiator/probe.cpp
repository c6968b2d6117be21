#include "initiator/probe.h"

#include <memory>
#include <vector>

#include "initiator/internal/connection.h"
#include "initiator/internal/lba_status_query.h"
#include "initiator/internal/lun_query.h"
#include "initiator/iscsi_source.h"

namespace wanbackup::initiator {
namespace {

using internal::Connection;

// Reads from the start of the LUN (wrapping around) for the rate test's duration, as copy would.
Result<RateTest> MeasureRate(const ProbeOptions& options) {
  IscsiSourceOptions source_options;
  source_options.connection = options.connection.Clone();
  source_options.lun = *options.lun;
  source_options.tuning = options.tuning;
  source_options.retry_timeout = std::chrono::seconds(30);
  source_options.query_deallocated = false;  // reads every byte, as the rate test must
  WB_ASSIGN_OR_RETURN(std::unique_ptr<IscsiSource> source,
                      IscsiSource::Open(std::move(source_options)));
  const uint64_t size = source->geometry().size_bytes;
  const uint64_t io = std::min<uint64_t>(source->preferred_request_size(), size);
  const uint64_t budget = BufferBudget(options.tuning.max_memory);
  std::vector<std::unique_ptr<uint8_t[]>> buffers;
  std::vector<uint8_t*> idle;
  uint64_t next = 0;
  size_t in_flight = 0;
  RateTest result;
  const auto start = std::chrono::steady_clock::now();
  const auto half = start + options.rate_test / 2;
  const auto end = start + options.rate_test;
  uint64_t bytes_at_half = 0;
  bool half_marked = false;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (!half_marked && now >= half) {
      bytes_at_half = result.bytes;
      half_marked = true;
    }
    while (now < end && in_flight < source->preferred_in_flight()) {
      if (idle.empty()) {
        if ((buffers.size() + 1) * io > budget) break;
        buffers.push_back(std::make_unique<uint8_t[]>(io));
        idle.push_back(buffers.back().get());
      }
      const uint64_t length = std::min(io, size - next);
      WB_RETURN_IF_ERROR(source->Submit(ReadRequest{next, length, idle.back(), 0}));
      idle.pop_back();
      next = (next + length) % size;
      ++in_flight;
    }
    if (in_flight == 0) break;
    WB_ASSIGN_OR_RETURN(ReadCompletion done, source->Wait());
    --in_flight;
    if (!done.status.ok()) return done.status;
    idle.push_back(done.request.buffer);
    if (std::chrono::steady_clock::now() < end) result.bytes += done.request.length;
  }
  result.elapsed = options.rate_test;
  const double seconds = std::chrono::duration<double>(result.elapsed).count();
  result.bytes_per_second = static_cast<double>(result.bytes) / seconds;
  result.steady_bytes_per_second =
      static_cast<double>(result.bytes - bytes_at_half) / (seconds / 2);
  const SourceStats stats = source->Stats();
  result.connections = static_cast<int>(stats.connections);
  result.queue_depth = static_cast<int>(stats.queue_depth);
  result.io_size = stats.io_size;
  result.plan = source->plan().explanation;
  return result;
}

// A thin LUN's mapped bytes: its size less what GET LBA STATUS reports deallocated. Left
// unknown when the target refuses the command (or the LUN is not thin).
void MeasureMapped(Connection& conn, LunInfo* lun) {
  if (!lun->is_disk() || !lun->thin_provisioned) return;
  Result<std::vector<ByteRange>> deallocated =
      internal::QueryDeallocated(conn, *lun, 0, lun->size_bytes());
  if (!deallocated.ok()) return;
  uint64_t mapped = lun->size_bytes();
  for (const ByteRange& r : *deallocated)
    mapped -= r.length;
  lun->mapped_bytes = mapped;
}

Result<ProbedTarget> ProbeTarget(const ProbeOptions& probe, const ConnectionOptions& options,
                                 std::optional<int> only_lun) {
  WB_ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn, Connection::Open(options));
  ProbedTarget target;
  target.name = options.target;
  target.negotiated = conn->negotiated();
  target.login_time = conn->login_time();
  target.rtt = conn->MinRtt();
  std::vector<int> luns;
  if (only_lun) {
    luns.push_back(*only_lun);
  } else {
    WB_ASSIGN_OR_RETURN(luns, internal::ReportLuns(*conn));
  }
  for (int lun : luns) {
    Result<LunInfo> info = internal::QueryLun(*conn, lun);
    if (!info.ok()) return info.status();
    MeasureMapped(*conn, &info.value());
    target.luns.push_back(std::move(info).value());
  }
  conn.reset();  // log out before the rate test logs in again
  if (only_lun && probe.rate_test.count() > 0 && !target.luns.empty() &&
      target.luns.front().is_disk()) {
    ProbeOptions rate{options.Clone(), only_lun, probe.rate_test, probe.tuning};
    WB_ASSIGN_OR_RETURN(RateTest measured, MeasureRate(rate));
    target.rate = std::move(measured);
  }
  return target;
}

}  // namespace

Result<ProbeReport> Probe(const ProbeOptions& options) {
  ProbeReport report;
  IscsiUrl portal;
  portal.host = options.connection.host;
  portal.port = options.connection.port;
  report.portal = portal.Portal();

  if (!options.connection.target.empty()) {
    WB_ASSIGN_OR_RETURN(ProbedTarget target, ProbeTarget(options, options.connection, options.lun));
    report.targets.push_back(std::move(target));
    return report;
  }

  report.discovered = true;
  std::vector<internal::DiscoveredTarget> found;
  {
    WB_ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn, Connection::Open(options.connection));
    WB_ASSIGN_OR_RETURN(found, conn->Discover());
  }
  for (const internal::DiscoveredTarget& d : found) {
    ConnectionOptions per_target = options.connection.Clone();
    per_target.target = d.name;
    Result<ProbedTarget> target = ProbeTarget(options, per_target, options.lun);
    ProbedTarget entry;
    if (target.ok()) {
      entry = std::move(target).value();
    } else {
      entry.name = d.name;
      entry.error = target.status();
    }
    entry.portals = d.portals;
    report.targets.push_back(std::move(entry));
  }
  return report;
}

}  // namespace wanbackup::initiator
