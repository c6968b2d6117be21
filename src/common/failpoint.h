// Failpoints for crash and fault tests. With WANBACKUP_FAILPOINT=<name>[:<n>] in the
// environment, the process kills itself with SIGKILL the n-th time (default first) it passes
// WB_FAILPOINT(name): a power cut at that instant, as far as the repository can tell (points:
// grep WB_FAILPOINT; s3.before-upload-complete is a multipart upload's, its parts stored). With
// WANBACKUP_FAIL=<name>[:<n>], WB_INJECT_ERROR(name) is true the n-th time it is passed, and the
// caller fails as if the system call there had failed with EIO (points: pack.fdatasync,
// catalog.begin, catalog.commit, restore.before-rename). With WANBACKUP_PAUSE=<name>[:<n>],
// WB_PAUSEPOINT(name) stops the process with SIGSTOP the n-th time it is passed, so that a test
// can change the repository at that instant and let it go on with SIGCONT (points:
// restore.after-check, between restore's check of the catalog and its first write;
// snapshot.before-pack-sync, before a pack is made durable, on S3 its upload). Free when
// the variables are unset. Thread-safe.
#pragma once

namespace wanbackup {

void Failpoint(const char* name);
bool InjectError(const char* name);
void Pausepoint(const char* name);

#define WB_FAILPOINT(name) ::wanbackup::Failpoint(name)
#define WB_INJECT_ERROR(name) ::wanbackup::InjectError(name)
#define WB_PAUSEPOINT(name) ::wanbackup::Pausepoint(name)

}  // namespace wanbackup
