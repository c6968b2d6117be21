// Failpoints for crash tests: with WANBACKUP_FAILPOINT=<name>[:<n>] in the environment, the
// process kills itself with SIGKILL the n-th time (default first) it passes WB_FAILPOINT(name).
// A power cut at that instant, as far as the repository can tell. Free when the variable is
// unset. Thread-safe.
#pragma once

namespace wanbackup {

void Failpoint(const char* name);

#define WB_FAILPOINT(name) ::wanbackup::Failpoint(name)

}  // namespace wanbackup
