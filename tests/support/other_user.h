// Another local user, for tests of what wanbackup run as root does with files that user controls
// (planted symlinks, configs they own, directories they can write): nobody (65534). Tests that use
// it need root and skip without it. Thread-safe (no shared state).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace wanbackup::testing {

inline constexpr uid_t kOtherUid = 65534;
inline constexpr gid_t kOtherGid = 65534;

// True when this process can act as another user (it is root).
bool CanSwitchUser();
// Runs `fn` in a forked child that has become the other user (setgroups, setresgid, setresuid);
// true when `fn` returned true there. Catch2 assertions do not work inside `fn`.
bool AsOtherUser(const std::function<bool()>& fn);
// Whether the other user may search every directory from / down to `path` (checked by mode
// bits for "others": the other user is in none of the groups that own them).
bool OtherUserCanSearch(const std::string& path);
// `argv` prefixed so that it runs as the other user (setpriv, no supplementary groups).
std::vector<std::string> AsOtherUserArgv(std::vector<std::string> argv);

}  // namespace wanbackup::testing
