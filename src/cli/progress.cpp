#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

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

}  // namespace wanbackup::cli
