#include "support/other_user.h"

#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace wanbackup::testing {

bool CanSwitchUser() {
  return ::geteuid() == 0;
}

bool AsOtherUser(const std::function<bool()>& fn) {
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const bool ok = ::setgroups(0, nullptr) == 0 &&
                    ::setresgid(kOtherGid, kOtherGid, kOtherGid) == 0 &&
                    ::setresuid(kOtherUid, kOtherUid, kOtherUid) == 0 && fn();
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool OtherUserCanSearch(const std::string& path) {
  for (std::string dir = path; !dir.empty(); dir = dir.substr(0, dir.rfind('/'))) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || (st.st_mode & S_IXOTH) == 0) return false;
  }
  return true;
}

std::vector<std::string> AsOtherUserArgv(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"setpriv", "--reuid=" + std::to_string(kOtherUid),
                             "--regid=" + std::to_string(kOtherGid), "--clear-groups", "--"});
  return argv;
}

}  // namespace wanbackup::testing
