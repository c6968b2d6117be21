#include "mount/snapshot_tree.h"

#include <algorithm>
#include <ctime>

#include <nlohmann/json.hpp>

namespace wanbackup::mount {
namespace {

std::string IsoTime(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  const size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(text, n);
}

}  // namespace

bool TagIsLinkName(std::string_view tag) {
  if (tag.empty() || tag == "." || tag == ".." || tag == kLatestName) return false;
  if (tag.find('/') != std::string_view::npos || tag.find('\0') != std::string_view::npos) {
    return false;
  }
  return !std::all_of(tag.begin(), tag.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string InfoJson(const catalog::SnapshotInfo& s) {
  const nlohmann::json j = {{"id", s.id},
                            {"source", s.source},
                            {"tag", s.tag},
                            {"host", s.hostname},
                            {"job", s.job},
                            {"time", IsoTime(s.started_unix_ms)},
                            {"started_unix_ms", s.started_unix_ms},
                            {"finished_unix_ms", s.finished_unix_ms},
                            {"size_bytes", s.size_bytes},
                            {"block_size", s.block_size},
                            {"chunk_size", s.chunk_size}};
  // Replace: a label that is not UTF-8 must not make the directory unreadable.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

SnapshotTree::SnapshotTree(std::vector<catalog::SnapshotInfo> snapshots)
    : snapshots_(std::move(snapshots)) {
  for (size_t i = 0; i < snapshots_.size(); ++i) {
    const catalog::SnapshotInfo& s = snapshots_[i];
    const std::string dir = std::to_string(s.id);
    dirs_[dir] = i;
    info_.push_back(InfoJson(s));
    // Oldest first: a later snapshot with the same tag takes the link over.
    if (TagIsLinkName(s.tag)) links_[s.tag] = dir;
  }
  if (!snapshots_.empty()) links_[kLatestName] = std::to_string(snapshots_.back().id);
}

TreeNode SnapshotTree::Lookup(std::string_view path) const {
  TreeNode node;
  if (path.empty() || path.front() != '/') return node;
  path.remove_prefix(1);
  if (path.empty()) {
    node.kind = TreeNode::Kind::kRoot;
    return node;
  }
  const size_t slash = path.find('/');
  const std::string_view first = path.substr(0, slash);
  if (slash == std::string_view::npos) {
    if (auto link = links_.find(first); link != links_.end()) {
      node.kind = TreeNode::Kind::kLink;
      node.target = link->second;
      return node;
    }
  }
  auto dir = dirs_.find(first);
  if (dir == dirs_.end()) return node;
  node.snapshot = dir->second;
  if (slash == std::string_view::npos) {
    node.kind = TreeNode::Kind::kSnapshotDir;
  } else if (path.substr(slash + 1) == kDiskImageName) {
    node.kind = TreeNode::Kind::kDiskImage;
  } else if (path.substr(slash + 1) == kInfoName) {
    node.kind = TreeNode::Kind::kInfo;
  }
  return node;
}

std::vector<std::string> SnapshotTree::List(const TreeNode& dir) const {
  std::vector<std::string> names;
  if (dir.kind == TreeNode::Kind::kSnapshotDir) return {kDiskImageName, kInfoName};
  if (dir.kind != TreeNode::Kind::kRoot) return names;
  for (const auto& entry : dirs_)
    names.push_back(entry.first);
  for (const auto& entry : links_)
    names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace wanbackup::mount
