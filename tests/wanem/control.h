// The emulator's control protocol: one text line per request on a Unix stream socket, answered
// with "ok" (plus lines of output) or "error: <reason>", then the server closes the connection.
//
//   ping                                   -> ok
//   show                                   -> one line per direction with its parameters
//   stats                                  -> one line per direction with counters
//   set [ab|ba|both] KEY=VALUE...          keys: delay=20ms rate=1gbit|unlimited queue=2MiB
//                                          loss=0.5%   (direction defaults to both)
//   blackhole [ab|ba|both] DURATION        drop everything for DURATION; 0 lifts it
//   stop                                   shut the emulator down (devices disappear)
//
// "ab" is site A -> site B (initiator to target), "ba" the way back. Pure functions here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "direction.h"

namespace wanem {

enum class Which { kAB, kBA, kBoth };

struct Command {
  enum class Kind { kPing, kShow, kStats, kSet, kBlackhole, kStop } kind = Kind::kPing;
  Which which = Which::kBoth;
  std::optional<int64_t> delay_ns;
  std::optional<uint64_t> rate_bps;
  std::optional<uint64_t> queue_bytes;
  std::optional<double> loss;
  int64_t blackhole_ns = 0;
};

wanbackup::Result<Command> ParseCommand(std::string_view line);

// Applies a kSet command's fields to `params` (fields not given stay as they are).
void ApplySet(const Command& command, LinkParams* params);

std::string FormatParams(const std::string& name, const LinkParams& params, int64_t now_ns);
std::string FormatStats(const std::string& name, const DirectionStats& stats);

}  // namespace wanem
