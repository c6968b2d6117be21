#include "initiator/probe.h"

#include "initiator/internal/connection.h"
#include "initiator/internal/lun_query.h"

namespace wanbackup::initiator {
namespace {

using internal::Connection;

Result<ProbedTarget> ProbeTarget(const ConnectionOptions& options, std::optional<int> only_lun) {
  WB_ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn, Connection::Open(options));
  ProbedTarget target;
  target.name = options.target;
  target.negotiated = conn->negotiated();
  target.login_time = conn->login_time();
  std::vector<int> luns;
  if (only_lun) {
    luns.push_back(*only_lun);
  } else {
    WB_ASSIGN_OR_RETURN(luns, internal::ReportLuns(*conn));
  }
  for (int lun : luns) {
    Result<LunInfo> info = internal::QueryLun(*conn, lun);
    if (!info.ok()) return info.status();
    target.luns.push_back(std::move(info).value());
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
    WB_ASSIGN_OR_RETURN(ProbedTarget target, ProbeTarget(options.connection, options.lun));
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
    Result<ProbedTarget> target = ProbeTarget(per_target, options.lun);
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
