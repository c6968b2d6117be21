// Filling in guard::Identity (guard/write_guard.h) from what the user typed: a path by what it
// resolves to (symlinks, hard links, `.` and `..`: the inode or device number), an iSCSI URL by
// IQN + LUN + the portal host's addresses. Touches the filesystem (stat, realpath) and, for two
// URLs that name the same IQN and LUN through hosts spelled differently, the resolver.
// Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "guard/write_guard.h"

namespace wanbackup::guard {

// The identity of an iSCSI URL or a local path (relative to the working directory). Never
// fails: a URL that names no LUN, or a path that cannot be examined, is kUnknown or a kPath
// that does not exist, compared by spelling. A URL's host is not resolved here (ResolveHosts).
Identity Identify(const std::string& spec);

// Fills in `id`'s loop_devices (an existing regular file, or a block device): every /dev/loopN
// whose backing file it is (a loop device stacked on this device), from
// /sys/block/loop*/loop/backing_file.
void FindLoopDevices(Identity* id);

// A host's addresses as Identity::hosts holds them: "loopback" for localhost and every
// loopback address, a numeric address in its canonical form, a name resolved; empty when a
// name does not resolve.
std::vector<std::string> HostAddresses(const std::string& host);

// Resolves the hosts of `to` and of each protected LUN with the same IQN and LUN (only those:
// no lookup for LUNs that differ anyway).
void ResolveHosts(Destination* to, std::vector<Protected>* protect);

// What repository `path` protects: its directory (and everything in it), and, when `to` is an
// existing regular file or a loop device on one, on the repository's device (a hard link or a
// bind mount may name one of its files from elsewhere), each file in it by inode; a directory
// of it that cannot be read is passed over, the walk goes on. `what` names it
// ("repository /x").
void AddRepository(const std::string& path, const Identity& to, std::vector<Protected>* protect);

// Every repository that `to` (a path, canonical) is, or lies in, whether or not a command or
// config names it: a directory that holds config.json and packs/ is one, and so are its files
// and any new file in it (`copy` has no --repo; a mistyped --repo names another). For a loop
// device, those its backing file is or lies in.
void AddRepositoriesHolding(const Identity& to, std::vector<Protected>* protect);

}  // namespace wanbackup::guard
