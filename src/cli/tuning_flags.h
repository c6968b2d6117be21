// The initiator's tuning flags (connections, queue depth, I/O size, memory cap, the paper's
// baseline, retry timeout), shared by every command that reads or writes a LUN.
#pragma once

#include <string>

#include "common/result.h"
#include "initiator/iscsi_source.h"

namespace CLI {
class App;
}

namespace wanbackup::cli {

struct TuningFlags {
  int connections = 0;
  int queue_depth = 0;
  std::string io_size;
  std::string max_memory = "256MiB";
  bool paper_baseline = false;
  std::string retry_timeout = "5m";
  std::string limit_rate;          // empty: unlimited
  std::string congestion_control;  // empty: the host's default
};

void AddTuningFlags(CLI::App* command, TuningFlags* flags);
// --limit-rate, for the commands that move a whole device (copy, snapshot).
void AddLimitRateFlag(CLI::App* command, TuningFlags* flags);
// The --limit-rate value in bytes per second; 0 when unlimited.
Result<uint64_t> LimitRate(const TuningFlags& flags);
// The "how autotune chooses" text for a command's --help footer.
std::string AutotuneHelp();
// How WRITEs to a LUN are sized and counted, for copy, restore and replicate.
std::string WriteTuneHelp();
// Fills options.tuning, options.retry_timeout and options.connection.congestion_control;
// rejects out-of-range values and a congestion control this host does not offer.
Status ApplyTuningFlags(const TuningFlags& flags, initiator::IscsiSourceOptions* options);

}  // namespace wanbackup::cli
