#define FUSE_USE_VERSION 35
#include "mount/internal/fuse_fs.h"

#include <fcntl.h>
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

#include "common/cancel.h"

namespace wanbackup::mount::internal {
namespace {

// One open disk.img: which snapshot, and its read-ahead state.
struct OpenImage {
  size_t snapshot = 0;
  std::unique_ptr<ReadAhead> ahead;
};

FuseContext& Context() {
  return *static_cast<FuseContext*>(fuse_get_context()->private_data);
}

void FillStat(const FuseContext& ctx, const TreeNode& node, struct stat* st) {
  std::memset(st, 0, sizeof *st);
  st->st_uid = ctx.uid;
  st->st_gid = ctx.gid;
  st->st_nlink = 1;
  st->st_blksize = 1 << 20;
  const auto& snapshots = ctx.tree.snapshots();
  // The root and the links carry the newest snapshot's time, a snapshot's nodes its own.
  const bool own = node.kind != TreeNode::Kind::kRoot && node.kind != TreeNode::Kind::kLink;
  if (own || !snapshots.empty()) {
    const auto& s = own ? snapshots[node.snapshot] : snapshots.back();
    st->st_mtime = static_cast<time_t>(s.started_unix_ms / 1000);
  }
  switch (node.kind) {
    case TreeNode::Kind::kRoot:
    case TreeNode::Kind::kSnapshotDir:
      st->st_mode = S_IFDIR | 0500;
      st->st_nlink = 2;
      break;
    case TreeNode::Kind::kDiskImage:
      st->st_mode = S_IFREG | 0400;
      st->st_size = static_cast<off_t>(snapshots[node.snapshot].size_bytes);
      break;
    case TreeNode::Kind::kInfo:
      st->st_mode = S_IFREG | 0400;
      st->st_size = static_cast<off_t>(ctx.tree.info_json(node.snapshot).size());
      break;
    case TreeNode::Kind::kLink:
      st->st_mode = S_IFLNK | 0777;
      st->st_size = static_cast<off_t>(node.target.size());
      break;
    case TreeNode::Kind::kNone:
      break;
  }
  st->st_blocks = (st->st_size + 511) / 512;
}

int GetAttr(const char* path, struct stat* st, fuse_file_info* /*fi*/) {
  const FuseContext& ctx = Context();
  const TreeNode node = ctx.tree.Lookup(path);
  if (node.kind == TreeNode::Kind::kNone) return -ENOENT;
  FillStat(ctx, node, st);
  return 0;
}

int ReadLink(const char* path, char* buf, size_t size) {
  const TreeNode node = Context().tree.Lookup(path);
  if (node.kind != TreeNode::Kind::kLink) return -EINVAL;
  if (size == 0) return -EINVAL;
  const size_t n = std::min(size - 1, node.target.size());
  std::memcpy(buf, node.target.data(), n);
  buf[n] = '\0';
  return 0;
}

int ReadDir(const char* path, void* buf, fuse_fill_dir_t filler, off_t /*offset*/,
            fuse_file_info* /*fi*/, fuse_readdir_flags /*flags*/) {
  const FuseContext& ctx = Context();
  const TreeNode node = ctx.tree.Lookup(path);
  if (node.kind != TreeNode::Kind::kRoot && node.kind != TreeNode::Kind::kSnapshotDir) {
    return node.kind == TreeNode::Kind::kNone ? -ENOENT : -ENOTDIR;
  }
  filler(buf, ".", nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
  filler(buf, "..", nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
  for (const std::string& name : ctx.tree.List(node))
    filler(buf, name.c_str(), nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
  return 0;
}

int Open(const char* path, fuse_file_info* fi) {
  FuseContext& ctx = Context();
  const TreeNode node = ctx.tree.Lookup(path);
  if (node.kind == TreeNode::Kind::kNone) return -ENOENT;
  if (node.kind != TreeNode::Kind::kDiskImage && node.kind != TreeNode::Kind::kInfo) {
    return -EISDIR;
  }
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EROFS;
  fi->keep_cache = 1;  // the bytes never change
  if (node.kind == TreeNode::Kind::kDiskImage) {
    auto open = std::make_unique<OpenImage>();
    open->snapshot = node.snapshot;
    open->ahead = ctx.reader.NewReadAhead(node.snapshot);
    fi->fh = reinterpret_cast<uint64_t>(open.release());  // Release() deletes it
  }
  return 0;
}

int Read(const char* path, char* buf, size_t size, off_t offset, fuse_file_info* fi) {
  FuseContext& ctx = Context();
  if (offset < 0) return -EINVAL;
  if (fi->fh == 0) {  // info.json
    const TreeNode node = ctx.tree.Lookup(path);
    if (node.kind != TreeNode::Kind::kInfo) return -EIO;
    const std::string& text = ctx.tree.info_json(node.snapshot);
    if (static_cast<uint64_t>(offset) >= text.size()) return 0;
    const size_t n = std::min(size, text.size() - static_cast<size_t>(offset));
    std::copy_n(text.data() + offset, n, buf);
    return static_cast<int>(n);
  }
  auto* open = reinterpret_cast<OpenImage*>(fi->fh);
  Result<size_t> n =
      ctx.reader.Read(open->snapshot, open->ahead.get(), static_cast<uint64_t>(offset), size,
                      reinterpret_cast<uint8_t*>(buf));
  if (!n.ok()) return -EIO;  // logged by the reader, with the LBA range
  return static_cast<int>(*n);
}

int Release(const char* /*path*/, fuse_file_info* fi) {
  delete reinterpret_cast<OpenImage*>(fi->fh);  // NOLINT(cppcoreguidelines-owning-memory): fh
  fi->fh = 0;
  return 0;
}

void* Init(fuse_conn_info* /*conn*/, fuse_config* cfg) {
  cfg->kernel_cache = 1;  // nothing changes under the mount: keep the page cache
  cfg->entry_timeout = 3600;
  cfg->attr_timeout = 3600;
  cfg->negative_timeout = 3600;
  return fuse_get_context()->private_data;
}

fuse_operations Operations() {
  fuse_operations ops{};
  ops.getattr = GetAttr;
  ops.readlink = ReadLink;
  ops.open = Open;
  ops.read = Read;
  ops.release = Release;
  ops.readdir = ReadDir;
  ops.init = Init;
  return ops;
}

// The session a signal ends. libfuse's own handlers are not installed when another handler is
// there already (the CLI's cancellation handler), so the mount installs its own for its life.
fuse_session* g_session = nullptr;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

extern "C" void OnMountSignal(int /*signo*/) {
  RequestCancellation();
  if (g_session != nullptr) fuse_session_exit(g_session);
}

class SignalScope {
 public:
  explicit SignalScope(fuse_session* session) {
    g_session = session;
    struct sigaction sa {};
    sa.sa_handler = OnMountSignal;
    sigemptyset(&sa.sa_mask);  // no SA_RESTART: the loop's read returns EINTR and sees the exit
    for (size_t i = 0; i < kSignals.size(); ++i)
      sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~SignalScope() {
    for (size_t i = 0; i < kSignals.size(); ++i)
      sigaction(kSignals[i], &old_[i], nullptr);
    g_session = nullptr;
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> old_{};
};

struct FuseDeleter {
  void operator()(fuse* f) const { fuse_destroy(f); }
};

}  // namespace

Status RunFuse(const std::string& mountpoint, const std::string& mount_at, FuseContext& context,
               const std::function<Status()>& on_mounted) {
  fuse_args args = FUSE_ARGS_INIT(0, nullptr);
  const char* argv[] = {"wanbackup", "-o",
                        "ro,allow_other,default_permissions,fsname=wanbackup,subtype=wanbackup"};
  for (const char* arg : argv)
    fuse_opt_add_arg(&args, arg);
  const fuse_operations ops = Operations();
  std::unique_ptr<fuse, FuseDeleter> f(fuse_new(&args, &ops, sizeof ops, &context));
  fuse_opt_free_args(&args);
  if (!f) return Status::Internal("mount: libfuse refused its options");
  if (fuse_mount(f.get(), mount_at.c_str()) != 0) {
    return Status::IoError("mounting " + mountpoint + " failed (libfuse's reason is above)");
  }
  Status status = on_mounted ? on_mounted() : Status::Ok();
  if (status.ok()) {
    SignalScope signals(fuse_get_session(f.get()));
    // A signal ends the loop with EINTR: the normal end of a foreground mount, as an unmount.
    const int ended = CancellationRequested() ? 0 : fuse_loop(f.get());
    if (ended < 0 && !CancellationRequested()) {
      status =
          Status::IoError("the FUSE loop of " + mountpoint + " failed: " + std::strerror(-ended));
    }
  }
  fuse_unmount(f.get());
  return status;
}

}  // namespace wanbackup::mount::internal
