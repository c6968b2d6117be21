// A progress line redrawn in place on a terminal (stderr); silent when stderr is not a TTY,
// so logs from cron stay clean. Not thread-safe: the command's thread owns it.
#pragma once

#include <chrono>
#include <string>

#include "common/result.h"

namespace wanbackup::cli {

// How progress is shown: "auto" (a redrawn line on a terminal, nothing otherwise), "plain" (a
// timestamped line every --progress-interval, for logs), or "none".
enum class ProgressMode { kAuto, kPlain, kNone };

// What --progress and --progress-interval ask for: the mode, and how often the work should
// report (the flag's value; else 10 s in plain mode, for logs; else `fallback`).
struct ProgressChoice {
  ProgressMode mode = ProgressMode::kAuto;
  std::chrono::milliseconds interval{0};
};
Result<ProgressChoice> ParseProgressFlags(const std::string& mode, const std::string& interval,
                                          std::chrono::milliseconds fallback);

class ProgressLine {
 public:
  // Enabled only when stderr is a terminal and `allowed` (not --quiet, not --json).
  explicit ProgressLine(bool allowed, ProgressMode mode = ProgressMode::kAuto);
  ~ProgressLine();
  bool enabled() const { return enabled_; }
  void Update(const std::string& text);
  // Erases the line, so a following message starts clean.
  void Clear();

 private:
  bool enabled_ = false;
  bool plain_ = false;
  size_t last_length_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Peak resident memory of this process (VmHWM), in bytes; 0 if unknown.
uint64_t PeakRssBytes();

}  // namespace wanbackup::cli
