#include "common/failpoint.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace wanbackup {

namespace {

// True the n-th time `name` matches `spec` ("name[:n]", n from 1).
bool Hit(const char* spec, const char* name, std::atomic<int>* hits) {
  if (spec == nullptr) return false;
  const std::string s(spec);
  const size_t colon = s.find(':');
  if (s.compare(0, colon, name) != 0) return false;
  const int wanted = colon == std::string::npos ? 1 : std::atoi(s.c_str() + colon + 1);
  return ++*hits == wanted;
}

}  // namespace

void Failpoint(const char* name) {
  static const char* spec = std::getenv("WANBACKUP_FAILPOINT");
  static std::atomic<int> hits{0};
  if (Hit(spec, name, &hits)) ::kill(::getpid(), SIGKILL);
}

bool InjectError(const char* name) {
  static const char* spec = std::getenv("WANBACKUP_FAIL");
  static std::atomic<int> hits{0};
  return Hit(spec, name, &hits);
}

void Pausepoint(const char* name) {
  static const char* spec = std::getenv("WANBACKUP_PAUSE");
  static std::atomic<int> hits{0};
  if (Hit(spec, name, &hits)) ::raise(SIGSTOP);
}

}  // namespace wanbackup
