#include "common/failpoint.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace wanbackup {

void Failpoint(const char* name) {
  static const char* spec = std::getenv("WANBACKUP_FAILPOINT");
  if (spec == nullptr) return;
  static std::atomic<int> hits{0};
  const std::string s(spec);
  const size_t colon = s.find(':');
  if (s.compare(0, colon, name) != 0) return;
  const int wanted = colon == std::string::npos ? 1 : std::atoi(s.c_str() + colon + 1);
  if (++hits == wanted) ::kill(::getpid(), SIGKILL);
}

}  // namespace wanbackup
