#include "cli/console.h"

#include <unistd.h>

#include <atomic>
#include <string>

#include "common/text.h"

namespace wanbackup::cli {
namespace {

std::atomic<bool> g_quiet{false};

void WriteLine(std::string_view prefix, std::string_view message) {
  std::string line = "wanbackup: ";
  line += prefix;
  // A message quotes names others chose (a source, a tag, a lock's holder): a newline or an
  // escape sequence in one must not fake a line or recolour the terminal.
  line += EscapeForTerminal(message);
  line += '\n';
  // One write() per line keeps lines whole when several threads report.
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

void PrintError(std::string_view message) {
  WriteLine("error: ", message);
}
void PrintWarning(std::string_view message) {
  WriteLine("warning: ", message);
}
void PrintInfo(std::string_view message) {
  if (!g_quiet.load(std::memory_order_relaxed)) WriteLine("", message);
}
void SetQuiet(bool quiet) {
  g_quiet.store(quiet, std::memory_order_relaxed);
}

}  // namespace wanbackup::cli
