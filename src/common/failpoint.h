// Failpoints for crash and fault tests. With WANBACKUP_FAILPOINT=<name>[:<n>] in the
// environment, the process kills itself with SIGKILL the n-th time (default first) it passes
// WB_FAILPOINT(name): a power cut at that instant, as far as the repository can tell. With
// WANBACKUP_FAIL=<name>[:<n>], WB_INJECT_ERROR(name) is true the n-th time it is passed, and the
// caller fails as if the system call there had failed with EIO (points: pack.fdatasync,
// catalog.begin, catalog.commit, restore.before-rename). Free when the variables are unset.
// Thread-safe.
#pragma once

namespace wanbackup {

void Failpoint(const char* name);
bool InjectError(const char* name);

#define WB_FAILPOINT(name) ::wanbackup::Failpoint(name)
#define WB_INJECT_ERROR(name) ::wanbackup::InjectError(name)

}  // namespace wanbackup
