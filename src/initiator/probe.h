// Probe: log in to a target and describe it (targets, LUNs, geometry, negotiated parameters).
// Blocking; call from one thread at a time per ProbeOptions.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "initiator/connection_options.h"
#include "initiator/lun_info.h"

namespace wanbackup::initiator {

struct ProbeOptions {
  ConnectionOptions connection;  // target empty: discover the portal's targets, probe each
  std::optional<int> lun;        // only this LUN; otherwise every LUN REPORT LUNS lists
};

struct ProbedTarget {
  std::string name;
  std::vector<std::string> portals;  // as the target advertises them (discovery only)
  NegotiatedParams negotiated;
  std::chrono::nanoseconds login_time{0};  // TCP connect + iSCSI login, several round trips
  std::vector<LunInfo> luns;
  Status error;  // why this target could not be probed (discovery only); OK otherwise
};

struct ProbeReport {
  std::string portal;       // host:port
  bool discovered = false;  // targets came from SendTargets discovery
  std::vector<ProbedTarget> targets;
};

// Fails when the portal cannot be reached or the named target/LUN cannot be probed. With
// discovery, a target that fails is reported in its `error` and the others are still probed.
Result<ProbeReport> Probe(const ProbeOptions& options);

}  // namespace wanbackup::initiator
