#include "common/trace.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace wanbackup {
namespace {

const auto kStart = std::chrono::steady_clock::now();

}  // namespace

bool TraceEnabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("WANBACKUP_TRACE");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

void TraceLine(const std::string& line) {
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "[trace %9.4f] ",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - kStart).count());
  const std::string out = stamp + line + "\n";
  (void)!::write(STDERR_FILENO, out.data(), out.size());
}

}  // namespace wanbackup
