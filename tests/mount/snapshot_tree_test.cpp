#include "mount/snapshot_tree.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace wanbackup::mount {
namespace {

catalog::SnapshotInfo TreeSnapshot(int64_t id, const std::string& tag) {
  catalog::SnapshotInfo s;
  s.id = id;
  s.tag = tag;
  s.source = "iscsi://san/iqn.2001-05.com.example:db/1";
  s.size_bytes = 64ull << 20;
  s.block_size = 512;
  s.chunk_size = 4u << 20;
  s.started_unix_ms = 1764288000000;  // 2025-11-28T00:00:00Z
  s.status = catalog::SnapshotStatus::kComplete;
  return s;
}

}  // namespace

TEST_CASE("mount tree: one directory per snapshot, latest and tags as links", "[mount]") {
  const SnapshotTree tree({TreeSnapshot(3, "nightly"), TreeSnapshot(7, "weekly"),
                           TreeSnapshot(9, "nightly"), TreeSnapshot(10, "")});
  CHECK(tree.List(tree.Lookup("/")) ==
        std::vector<std::string>{"10", "3", "7", "9", "latest", "nightly", "weekly"});
  CHECK(tree.Lookup("/latest").kind == TreeNode::Kind::kLink);
  CHECK(tree.Lookup("/latest").target == "10");
  CHECK(tree.Lookup("/nightly").target == "9");  // the newest with that tag
  CHECK(tree.Lookup("/weekly").target == "7");
  CHECK(tree.Lookup("/7").kind == TreeNode::Kind::kSnapshotDir);
  CHECK(tree.List(tree.Lookup("/7")) == std::vector<std::string>{"disk.img", "info.json"});
  const TreeNode disk = tree.Lookup("/9/disk.img");
  CHECK(disk.kind == TreeNode::Kind::kDiskImage);
  CHECK(tree.snapshots()[disk.snapshot].id == 9);
  CHECK(tree.Lookup("/9/other").kind == TreeNode::Kind::kNone);
  CHECK(tree.Lookup("/11").kind == TreeNode::Kind::kNone);
  CHECK(tree.Lookup("/latest/disk.img").kind == TreeNode::Kind::kNone);  // the kernel follows
}

TEST_CASE("mount tree: a tag that cannot be a link name gets none", "[mount]") {
  CHECK(TagIsLinkName("nightly"));
  CHECK(TagIsLinkName("before-upgrade 2"));
  CHECK_FALSE(TagIsLinkName(""));
  CHECK_FALSE(TagIsLinkName("."));
  CHECK_FALSE(TagIsLinkName(".."));
  CHECK_FALSE(TagIsLinkName("latest"));
  CHECK_FALSE(TagIsLinkName("12"));
  CHECK_FALSE(TagIsLinkName("a/b"));
  const SnapshotTree tree({TreeSnapshot(1, "5"), TreeSnapshot(2, "latest")});
  CHECK(tree.Lookup("/latest").target == "2");
  CHECK(tree.List(tree.Lookup("/")) == std::vector<std::string>{"1", "2", "latest"});
}

TEST_CASE("mount tree: info.json holds source, time, size, block size and tag", "[mount]") {
  const auto j = nlohmann::json::parse(InfoJson(TreeSnapshot(4, "nightly")));
  CHECK(j["id"] == 4);
  CHECK(j["source"] == "iscsi://san/iqn.2001-05.com.example:db/1");
  CHECK(j["time"] == "2025-11-28T00:00:00Z");
  CHECK(j["size_bytes"] == 64ull << 20);
  CHECK(j["block_size"] == 512);
  CHECK(j["tag"] == "nightly");
}

TEST_CASE("mount tree: an empty repository has an empty root", "[mount]") {
  const SnapshotTree tree({});
  CHECK(tree.List(tree.Lookup("/")).empty());
  CHECK(tree.Lookup("/latest").kind == TreeNode::Kind::kNone);
}

}  // namespace wanbackup::mount
