#include "guard/write_guard.h"

#include <algorithm>

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

// What the refusal says `to` is, or "" when `p` does not refuse it.
std::string Refusal(const Destination& to, const Protected& p) {
  const Identity& id = to.identity;
  switch (p.rule) {
    case Rule::kRepository:
      if (!p.tree) return Same(id, p.identity) ? "a file of " + p.what : "";
      if (Same(id, p.identity)) return p.what;
      if (Inside(id, p.identity)) return "a file of " + p.what;
      if (id.kind == Identity::Kind::kBlock && p.identity.exists &&
          id.rdev == p.identity.file.dev) {
        return "the device that holds " + p.what;
      }
      return "";
    case Rule::kJobSource:
    case Rule::kNamedFile:
      return Same(id, p.identity) ? p.what : "";
    case Rule::kSnapshotSource:
      if (p.overridable && to.overwrite_source) return "";
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
      return a.rdev == b.rdev;
    case Kind::kPath:
      if (a.exists != b.exists) return false;
      return a.exists ? a.file == b.file : a.spelling == b.spelling;
    case Kind::kUnknown:
      return !a.spelling.empty() && a.spelling == b.spelling;
  }
  return false;
}

Status CheckWriteTarget(const Destination& to, const std::vector<Protected>& protect) {
  // The destination itself, then each file a loop device of it writes to, by that identity.
  std::vector<Destination> aliases = {to};
  for (const Identity& file : to.identity.backing) {
    Destination alias = to;
    alias.name = to.name + " (a loop device on " + file.spelling + ")";
    alias.identity = file;
    aliases.push_back(std::move(alias));
  }
  for (const Destination& as : aliases) {
    for (const Protected& p : protect) {
      const std::string what = Refusal(as, p);
      if (what.empty()) continue;
      return Status::InvalidArgument(as.name + " is " + what +
                                     (p.hint.empty() ? "" : "; " + p.hint) +
                                     ". Nothing was written");
    }
  }
  return Status::Ok();
}

}  // namespace wanbackup::guard
