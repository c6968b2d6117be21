#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "common/units.h"

namespace wanbackup::cli {

ProgressLine::ProgressLine(bool allowed, ProgressMode mode)
    : enabled_(allowed && (mode == ProgressMode::kPlain ||
                           (mode == ProgressMode::kAuto && ::isatty(STDERR_FILENO) == 1))),
      plain_(mode == ProgressMode::kPlain) {}

ProgressLine::~ProgressLine() {
  Clear();
}

void ProgressLine::Update(const std::string& text) {
  if (!enabled_) return;
  if (plain_) {
    char stamp[32];
    std::snprintf(stamp, sizeof stamp, "[%8.2fs] ",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    const std::string line = "wanbackup: " + std::string(stamp) + text + "\n";
    (void)!::write(STDERR_FILENO, line.data(), line.size());
    return;
  }
  std::string line = "\r" + text;
  if (text.size() < last_length_) line += std::string(last_length_ - text.size(), ' ');
  last_length_ = text.size();
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

void ProgressLine::Clear() {
  if (!enabled_ || plain_ || last_length_ == 0) return;
  const std::string blank = "\r" + std::string(last_length_, ' ') + "\r";
  (void)!::write(STDERR_FILENO, blank.data(), blank.size());
  last_length_ = 0;
}

uint64_t PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

Result<ProgressChoice> ParseProgressFlags(const std::string& mode, const std::string& interval,
                                          std::chrono::milliseconds fallback) {
  ProgressChoice c;
  c.mode = mode == "plain"  ? ProgressMode::kPlain
           : mode == "none" ? ProgressMode::kNone
                            : ProgressMode::kAuto;
  c.interval = fallback;
  if (!interval.empty()) {
    WB_ASSIGN_OR_RETURN(auto parsed, ParseDuration(interval, "s"));
    c.interval = std::chrono::ceil<std::chrono::milliseconds>(parsed);
  } else if (c.mode == ProgressMode::kPlain) {
    c.interval = std::chrono::seconds(10);
  }
  return c;
}

}  // namespace wanbackup::cli
