// The mount's name space: one directory per complete snapshot, named by its id ("12"), holding
// disk.img (the LUN's bytes, its exact size) and info.json (source, time, size, block size,
// tag); a symlink "latest" to the newest snapshot's directory, and one symlink per tag name to
// the newest snapshot with that tag. A tag that cannot be a file name here (empty, "." or "..",
// holding '/', all digits, or "latest") gets no link. Pure; immutable once built, so
// thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/catalog.h"

namespace wanbackup::mount {

inline constexpr char kDiskImageName[] = "disk.img";
inline constexpr char kInfoName[] = "info.json";
inline constexpr char kLatestName[] = "latest";

struct TreeNode {
  enum class Kind { kNone, kRoot, kSnapshotDir, kDiskImage, kInfo, kLink };
  Kind kind = Kind::kNone;
  size_t snapshot = 0;  // index into snapshots(): kSnapshotDir, kDiskImage, kInfo
  std::string target;   // kLink: the relative target ("12")
};

class SnapshotTree {
 public:
  // `snapshots`: complete snapshots, oldest first (as Catalog::Snapshots lists them).
  explicit SnapshotTree(std::vector<catalog::SnapshotInfo> snapshots);

  // `path` as FUSE gives it: "/", "/12", "/12/disk.img", "/latest".
  TreeNode Lookup(std::string_view path) const;
  // The names in a directory node (kRoot or kSnapshotDir), sorted.
  std::vector<std::string> List(const TreeNode& dir) const;

  const std::vector<catalog::SnapshotInfo>& snapshots() const { return snapshots_; }
  const std::string& info_json(size_t snapshot) const { return info_[snapshot]; }

 private:
  std::vector<catalog::SnapshotInfo> snapshots_;
  std::vector<std::string> info_;
  std::map<std::string, size_t, std::less<>> dirs_;        // "12" -> index
  std::map<std::string, std::string, std::less<>> links_;  // "latest" -> "12"
};

// info.json of a snapshot: one JSON object and a newline.
std::string InfoJson(const catalog::SnapshotInfo& snapshot);
// Whether `tag` can name a link in the mount's root (see the header comment).
bool TagIsLinkName(std::string_view tag);

}  // namespace wanbackup::mount
