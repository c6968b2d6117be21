// What a LUN destination adds to a command's JSON summary (restore, copy, replicate): the bytes
// the target acknowledged, those sent as WRITE SAME (no data on the wire) and the retries.
// Header-only; called on the command's thread after the sink finished.
#pragma once

#include <nlohmann/json.hpp>

#include "cli/sink_open.h"

namespace wanbackup::cli::internal {

inline void AddLunStats(const OpenedSink& opened, nlohmann::json* j) {
  if (opened.lun == nullptr) return;
  const initiator::IscsiSinkStats s = opened.lun->Stats();
  (*j)["bytes_written"] = s.bytes_written;
  (*j)["bytes_zeroed"] = s.bytes_zeroed;  // WRITE SAME: no data on the wire
  (*j)["bytes_sent"] = s.bytes_written - s.bytes_zeroed;
  (*j)["write_connections"] = s.peak_connections;
  (*j)["write_retries"] = s.retries;
  (*j)["write_reconnects"] = s.reconnects;
  (*j)["write_same_refused"] = s.write_same_refused;
}

}  // namespace wanbackup::cli::internal
