#include "guard/write_guard.h"

#include <algorithm>

#include "common/char_device.h"

namespace wanbackup::guard {
namespace {

bool HostsMeet(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  if (a.empty() || b.empty()) return true;  // a host not known may be any host
  return std::any_of(a.begin(), a.end(), [&b](const std::string& host) {
    return std::find(b.begin(), b.end(), host) != b.end();
  });
}

bool IsPath(const Identity& id) {
  return id.kind == Identity::Kind::kPath || id.kind == Identity::Kind::kBlock;
}

// Whether `to` lies inside the directory `dir` (or is it).
bool Inside(const Identity& to, const Identity& dir) {
  if (!IsPath(to) || dir.kind != Identity::Kind::kPath || !dir.exists) return false;
  if (to.exists && to.file == dir.file) return true;
  return std::find(to.directories.begin(), to.directories.end(), dir.file) != to.directories.end();
}

// Whether the block device `to` holds the file or directory `file` (the partition its
// filesystem is on, or that partition's whole disk).
bool Holds(const Identity& to, const Identity& file) {
  if (to.kind != Identity::Kind::kBlock || file.kind != Identity::Kind::kPath || !file.exists) {
    return false;
  }
  return to.rdev == file.file.dev || (file.whole_disk != 0 && to.rdev == file.whole_disk);
}

// What the refusal says `to` is, or "" when `p` does not refuse it.
std::string Refusal(const Destination& to, const Protected& p) {
  const Identity& id = to.identity;
  switch (p.rule) {
    case Rule::kRepository:
      if (!p.tree) return Same(id, p.identity) ? "a file of " + p.what : "";
      if (Same(id, p.identity)) return p.what;
      if (Inside(id, p.identity)) return "a file of " + p.what;
      if (Holds(id, p.identity)) return "the device that holds " + p.what;
      return "";
    case Rule::kJobSource:
    case Rule::kNamedFile:
      if (Holds(id, p.identity)) return "the device that holds " + p.what;
      return Same(id, p.identity) ? p.what : "";
    case Rule::kSnapshotSource:
      if (p.overridable && to.overwrite_source) return "";
      if (Holds(id, p.identity)) return "the device that holds " + p.what;
      return Same(id, p.identity) ? p.what : "";
    case Rule::kReplica:
      if (!Same(id, p.identity)) return "";
      if (to.replicate_series && (!p.series || Same(*to.replicate_series, *p.series))) return "";
      return p.what;
  }
  return "";
}

}  // namespace

bool Same(const Identity& a, const Identity& b) {
  using Kind = Identity::Kind;
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kLun:
      return !a.lun.empty() && a.lun == b.lun && HostsMeet(a.hosts, b.hosts);
    case Kind::kBlock:
      return a.rdev == b.rdev || (a.whole_disk != 0 && a.whole_disk == b.rdev) ||
             (b.whole_disk != 0 && b.whole_disk == a.rdev);
    case Kind::kPath:
      if (a.exists != b.exists) return false;
      return a.exists ? a.file == b.file : a.spelling == b.spelling;
    case Kind::kUnknown:
      return !a.spelling.empty() && a.spelling == b.spelling;
  }
  return false;
}

Status CheckDeviceName(const Destination& to) {
  const Identity& id = to.identity;
  if (id.character) {
    const std::string refusal = CharacterDeviceRefusal(to.name, static_cast<dev_t>(id.rdev));
    return refusal.empty() ? Status::Ok() : Status::InvalidArgument(refusal);
  }
  if (id.kind != Identity::Kind::kPath || id.exists) return Status::Ok();
  const std::string& path = id.spelling;
  const bool device_dir =
      path.rfind('/') == 4 || path.starts_with("/dev/disk/") || path.starts_with("/dev/mapper/");
  // /dev/stdout, /dev/fd/N: links into /proc, to a file that may have been deleted (the
  // opening refuses that, common/safe_path.h); not a device name.
  const bool stream =
      path == "/dev/stdout" || path == "/dev/stderr" || path.starts_with("/dev/fd/");
  if (!path.starts_with("/dev/") || !device_dir || stream) return Status::Ok();
  return Status::InvalidArgument(to.name +
                                 " does not exist, and a new file among the devices is no disk "
                                 "(is the device name right? lsblk lists them). Nothing was "
                                 "written");
}

namespace {

// Every file or device `id`'s data lives on through loop devices, innermost last: a loop
// device's backing file, or a loop device stacked on another one and its file in turn.
void BackingChain(const Identity& id, std::vector<const Identity*>* out) {
  for (const Identity& file : id.backing) {
    if (out->size() >= 8) return;  // a loop of loop devices cannot be deeper than this is useful
    out->push_back(&file);
    BackingChain(file, out);
  }
}

}  // namespace

Status CheckWriteTarget(const Destination& to, const std::vector<Protected>& protect) {
  if (!to.identity.error.empty()) {
    return Status::InvalidArgument(to.name.substr(0, 200) + (to.name.size() > 200 ? "..." : "") +
                                   " cannot be examined (" + to.identity.error +
                                   "), so it cannot be checked against what must not be "
                                   "overwritten. Nothing was written");
  }
  // The destination itself, then each file or device a loop device of it writes to.
  std::vector<Destination> aliases = {to};
  std::vector<const Identity*> chain;
  BackingChain(to.identity, &chain);
  for (const Identity* file : chain) {
    Destination alias = to;
    alias.name = to.name + " (a loop device on " + file->spelling + ")";
    alias.identity = *file;
    aliases.push_back(std::move(alias));
  }
  // A protected loop device protects what it writes to as well.
  std::vector<Protected> all = protect;
  for (const Protected& p : protect) {
    chain.clear();
    BackingChain(p.identity, &chain);
    for (const Identity* file : chain) {
      Protected alias = p;
      alias.identity = *file;
      alias.what = p.what + " (" + p.identity.spelling + ", a loop device on it)";
      all.push_back(std::move(alias));
    }
  }
  for (const Destination& as : aliases) {
    for (const Protected& p : all) {
      const std::string what = Refusal(as, p);
      if (what.empty()) continue;
      return Status::InvalidArgument(as.name + " is " + what +
                                     (p.hint.empty() ? "" : "; " + p.hint) +
                                     ". Nothing was written");
    }
  }
  if (!to.identity.loop_devices.empty()) {
    const std::string& loop = to.identity.loop_devices.front();
    const bool device = to.identity.kind == Identity::Kind::kBlock;
    return Status::InvalidArgument(
        to.name + (device ? " is the device under " : " is the backing file of ") + loop +
        ": written behind that device's back, the disk it serves would be left inconsistent; "
        "write to " +
        loop + " instead, or detach it first (losetup -d " + loop + "). Nothing was written");
  }
  return Status::Ok();
}

}  // namespace wanbackup::guard
