// Probe: log in to a target and describe it (targets, LUNs, geometry, negotiated parameters).
// Blocking; call from one thread at a time per ProbeOptions.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "initiator/autotune.h"
#include "initiator/connection_options.h"
#include "initiator/lun_info.h"

namespace wanbackup::initiator {

struct ProbeOptions {
  ConnectionOptions connection;  // target empty: discover the portal's targets, probe each
  std::optional<int> lun;        // only this LUN; otherwise every LUN REPORT LUNS lists
  // Read this long from the LUN named by `lun` (a disk) to measure throughput; 0: don't.
  std::chrono::milliseconds rate_test{0};
  TuningRequest tuning;  // what the rate test may use (user overrides, memory cap)
};

// What reading for a while achieved, and with which settings.
struct RateTest {
  uint64_t bytes = 0;
  std::chrono::nanoseconds elapsed{0};
  double bytes_per_second = 0;         // over the whole test, start-up included
  double steady_bytes_per_second = 0;  // over the second half, once connections have ramped up
  int connections = 0;
  int queue_depth = 0;
  uint64_t io_size = 0;
  std::string plan;  // autotune's explanation
};

struct ProbedTarget {
  std::string name;
  std::vector<std::string> portals;  // as the target advertises them (discovery only)
  NegotiatedParams negotiated;
  std::chrono::nanoseconds login_time{0};  // TCP connect + iSCSI login, several round trips
  std::vector<LunInfo> luns;
  std::chrono::nanoseconds rtt{0};  // smallest round trip the kernel saw on the login connection
  std::optional<RateTest> rate;     // when a rate test ran
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
