// The one guard every command that writes asks before any byte is written and before any login
// the answer does not need (restore, replicate, copy, a job's replicate step, the dry run):
// may the destination be written? It is refused when it is, by identity and not by spelling,
//   (a) a file or directory of a repository the command or the config names, or the device that
//       holds one;
//   (b) the source of a job in the config;
//   (c) the source of a snapshot in the repository (complete, or running now);
//   (d) a replica the repository records, unless the command is replicate of the series (the
//       source) that replica holds;
//   (e) for a file the config writes itself (the metrics textfile): any other file the config
//       names (the config file, a credential file, a replica);
// and, apart (CheckDeviceName), a device path that does not exist (a mistyped device name), and
// a file a loop device reads and writes (a write replaces the file by rename, and the device
// would go on showing the old data: the disk it serves would not be restored).
// A device is refused for what a file it holds is refused for, a partition for what its disk is
// (and the other way round), and a loop device for what its backing file is.
// Pure rules: the caller fills in what the destination and the protected things are
// (guard/identity.h). docs/threat-model.md, "Write targets". Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace wanbackup::guard {

struct FileId {
  uint64_t dev = 0;
  uint64_t ino = 0;
  bool operator==(const FileId&) const = default;
};

// What a destination, a source or a repository is, whatever it was called.
struct Identity {
  enum class Kind {
    kUnknown,  // compared by `spelling` only (a URL without a LUN, ...)
    kPath,     // a regular file or directory (or a path that does not exist yet)
    kBlock,    // a block device
    kLun,      // an iSCSI LUN
  };
  Kind kind = Kind::kUnknown;
  std::string spelling;  // the canonical path, or the URL as given
  // kPath, kBlock: the inode (when it exists) and the directories that hold it, innermost first
  // (of its canonical path: symlinks, `.` and `..` resolved).
  bool exists = false;
  // kPath: why the path could not be examined (too long, a loop of links, no permission); a
  // destination that cannot be examined cannot be checked, and is refused.
  std::string error;
  FileId file;
  uint64_t links = 0;  // hard links of an existing regular file
  std::vector<FileId> directories;
  uint64_t rdev = 0;       // kBlock, and a kPath that is a character device: the device number
  bool character = false;  // kPath: an existing character device
  // kBlock: the whole disk's device number when this is a partition of one (its data is part
  // of that disk's); kPath: the same for the partition that holds the file. 0: none.
  uint64_t whole_disk = 0;
  // kBlock: a loop device's backing file, or a loop partition's (the same data under another
  // identity); the guard refuses the device for whatever it refuses that file for, and a
  // protected loop device protects its file.
  std::vector<Identity> backing;
  // kPath, an existing regular file, or kBlock: the loop devices (/dev/loopN) whose backing
  // file it is, or that are stacked on it (filled in for a destination only: FindLoopDevices).
  std::vector<std::string> loop_devices;
  // kLun: "IQN/LUN", and the portal host's addresses ("loopback" for any loopback address);
  // empty `hosts`: not known (a name that does not resolve), so any host may be this one.
  std::string lun;
  std::string host;  // as the URL spells it
  std::vector<std::string> hosts;
};

// Whether `a` and `b` are the same file, device or LUN. Two block devices are the same when
// they share data: one is the other, or a partition of it.
bool Same(const Identity& a, const Identity& b);

enum class Rule {
  kRepository,
  kJobSource,
  kSnapshotSource,
  kReplica,
  kNamedFile,  // another file the config names: itself, a credential file, a replica
};

// One thing a command must not write over.
struct Protected {
  Rule rule = Rule::kRepository;
  Identity identity;
  // How the refusal names it, after "DEST is ": "repository /x", "the source of job db",
  // "the source of snapshot 4", "replica 2 of repository /x".
  std::string what;
  // kRepository: the repository's directory (everything inside it, and the device that holds
  // it, are its files) rather than one file of it.
  bool tree = false;
  // kSnapshotSource: `restore --overwrite-source` may write it (a running one, never).
  bool overridable = false;
  // kReplica: the source of the snapshot it holds or is being written (the series); none: not
  // known (that snapshot was forgotten).
  std::optional<Identity> series;
  std::string hint;  // what to do instead, appended to the refusal; may be empty
};

struct Destination {
  std::string name;  // as the user gave it
  Identity identity;
  // replicate: the source of the snapshot it writes; its own series' replicas may be written.
  std::optional<Identity> replicate_series;
  bool overwrite_source = false;  // restore --overwrite-source
};

// InvalidArgument when `to` is a path that does not exist in /dev, /dev/disk/… or /dev/mapper
// (a mistyped device name: a new file there would take memory and hold no disk; /dev/shm is
// a filesystem like any other), or a character device that is no place for a disk's bytes
// (common/char_device.h: /dev/mem, a SCSI generic node, ...).
Status CheckDeviceName(const Destination& to);

// InvalidArgument, one line, "DEST is WHAT[; HINT]. Nothing was written", for the first rule
// that refuses `to`; Ok when none does.
Status CheckWriteTarget(const Destination& to, const std::vector<Protected>& protect);

}  // namespace wanbackup::guard
