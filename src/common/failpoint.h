// Failpoints for crash and fault tests, free when the variables are unset. Thread-safe.
// - WANBACKUP_FAILPOINT=<name>[:<n>]: the process kills itself with SIGKILL the n-th time
//   (default first) it passes WB_FAILPOINT(name). A power cut at that instant, as far as the
//   repository can tell.
// - WANBACKUP_FAILPOINT_ERROR=<name>[:<n>]: WB_FAILPOINT_ERROR(name) is true the n-th time
//   (default first) it is passed, and false before and after; the caller then fails that step
//   as the real call would (a failed fdatasync, a failed COMMIT). Once only: a retry succeeds,
//   which is exactly what a retried fsync would look like to the caller.
#pragma once

namespace wanbackup {

void Failpoint(const char* name);
bool FailpointError(const char* name);

#define WB_FAILPOINT(name) ::wanbackup::Failpoint(name)
#define WB_FAILPOINT_ERROR(name) ::wanbackup::FailpointError(name)

}  // namespace wanbackup
