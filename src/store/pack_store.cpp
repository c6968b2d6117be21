#include "store/pack_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <tuple>

#include "common/read_file.h"
#include "common/unique_fd.h"
#include "store/fs_util.h"

namespace wanbackup::pipeline {
namespace {

// Owns its descriptor.
class LocalPackReader final : public PackReader {
 public:
  explicit LocalPackReader(int fd) : fd_(fd), reader_(fd) {}
  ~LocalPackReader() override { ::close(fd_); }
  LocalPackReader(const LocalPackReader&) = delete;
  LocalPackReader& operator=(const LocalPackReader&) = delete;
  Status ReadAt(uint64_t offset, uint8_t* data, size_t size) const override {
    return reader_.ReadAt(offset, data, size);
  }
  Result<uint64_t> Size() const override { return reader_.Size(); }

 private:
  int fd_;
  FdPackReader reader_;
};

// Inside the repository nothing is followed: whoever can write it (a storage admin, a shared
// mount) could point packs/XX at another repository's packs, which prune would then delete, or a
// pack at a FIFO, which a reader would wait on forever. So packs/ and its prefix directories are
// opened O_NOFOLLOW, each step relative to the last, and a pack must be a regular file.
class LocalPackStore final : public PackStore {
 public:
  explicit LocalPackStore(std::string dir) : dir_(std::move(dir)) {}

  // packs/XX for the pack `name` (or XX itself), opened without following a link.
  Result<UniqueFd> OpenPrefix(const std::string& prefix) const {
    UniqueFd top(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!top.valid()) return Status::FromErrno(errno, "opening " + dir_);
    UniqueFd sub(
        ::openat(top.get(), prefix.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub.valid() && errno == ELOOP) {
      return Status::Corruption(dir_ + "/" + prefix +
                                " is a symlink, not a directory of this repository's packs");
    }
    if (!sub.valid()) return Status::FromErrno(errno, "opening " + dir_ + "/" + prefix);
    return sub;
  }

  Result<std::unique_ptr<PackWriter>> Create(const std::string& name,
                                             const std::string& repository_id) override {
    const std::string prefix = dir_ + "/" + name.substr(0, 2);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::FromErrno(errno, "creating " + prefix);
    }
    WB_RETURN_IF_ERROR(OpenPrefix(name.substr(0, 2)).status());  // a directory, not a link
    WB_ASSIGN_OR_RETURN(std::unique_ptr<PackWriter> writer,
                        PackWriter::Create(Describe(name), repository_id));
    // The pack's name must survive a power loss as surely as its data will (fdatasync covers
    // only the file): sync both directories before the catalog can ever name it.
    WB_RETURN_IF_ERROR(SyncDir(prefix));
    WB_RETURN_IF_ERROR(SyncDir(dir_));
    return writer;
  }

  Result<std::unique_ptr<PackReader>> Open(const std::string& name) override {
    const std::string path = Describe(name);
    Result<UniqueFd> dir = OpenPrefix(name.substr(0, 2));
    if (!dir.ok() && dir.status().code() == StatusCode::kNotFound) {
      return Status::Corruption("pack file " + path + " is missing");
    }
    WB_RETURN_IF_ERROR(dir.status());
    UniqueFd fd(::openat(dir->get(), (name + ".pack").c_str(),
                         O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd.valid()) {
      if (errno == ENOENT) return Status::Corruption("pack file " + path + " is missing");
      if (errno == ELOOP) return Status::Corruption("pack file " + path + " is a symlink");
      return Status::FromErrno(errno, "opening " + path);
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, "reading " + path);
    if (!S_ISREG(st.st_mode))
      return Status::Corruption("pack file " + path + " is no regular file");
    return std::unique_ptr<PackReader>(std::make_unique<LocalPackReader>(fd.Release()));
  }

  Result<std::vector<StoredPack>> List() override {
    std::vector<StoredPack> packs;
    DIR* top = ::opendir(dir_.c_str());
    if (top == nullptr) return Status::FromErrno(errno, "listing " + dir_);
    while (dirent* sub = ::readdir(top)) {
      const std::string prefix = sub->d_name;
      if (prefix.size() != 2 || prefix[0] == '.') continue;
      Result<UniqueFd> dir = OpenPrefix(prefix);
      if (!dir.ok()) continue;  // a link or no directory holds none of this repository's packs
      DIR* d = ::fdopendir(dir->get());
      if (d == nullptr) continue;
      const int owned_by_d = dir->Release();  // closedir closes it
      (void)owned_by_d;
      Status odd = Status::Ok();
      while (dirent* e = ::readdir(d)) {
        StoredPack p;
        if (!IsPackFileName(e->d_name, &p.name) || p.name.compare(0, 2, prefix) != 0) continue;
        struct stat st {};
        if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (!S_ISREG(st.st_mode)) {
          // Not skipped in silence: a catalog rebuilt without it would lose its snapshots.
          odd = Status::Corruption(Describe(p.name) + " is " + FileKind(st.st_mode) +
                                   ", where a pack file belongs (wanbackup makes none such); "
                                   "put the pack back from a copy, or move it away, and run "
                                   "again");
          break;
        }
        p.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
        p.size = static_cast<uint64_t>(st.st_size);
        packs.push_back(p);
      }
      ::closedir(d);
      if (!odd.ok()) {
        ::closedir(top);
        return odd;
      }
    }
    ::closedir(top);
    std::sort(packs.begin(), packs.end(), [](const StoredPack& a, const StoredPack& b) {
      return std::tie(a.mtime_ns, a.name) < std::tie(b.mtime_ns, b.name);
    });
    return packs;
  }

  Status Remove(const std::string& name) override {
    const std::string path = Describe(name);
    Result<UniqueFd> dir = OpenPrefix(name.substr(0, 2));
    if (!dir.ok() && dir.status().code() == StatusCode::kNotFound) return Status::Ok();
    WB_RETURN_IF_ERROR(dir.status());
    if (::unlinkat(dir->get(), (name + ".pack").c_str(), 0) != 0 && errno != ENOENT) {
      return Status::FromErrno(errno, "removing " + path);
    }
    if (::fsync(dir->get()) != 0) return Status::FromErrno(errno, "flushing " + dir_);
    return Status::Ok();
  }

  // A pack file is written in place: one a run left unfinished is in List like any other.
  Result<size_t> AbandonUnfinished() override { return size_t{0}; }

  std::string Describe(const std::string& name) const override {
    return dir_ + "/" + name.substr(0, 2) + "/" + name + ".pack";
  }

 private:
  std::string dir_;
};

}  // namespace

bool IsPackFileName(const std::string& file, std::string* name) {
  constexpr size_t kHex = 32;
  if (file.size() != kHex + 5 || file.compare(kHex, 5, ".pack") != 0) return false;
  *name = file.substr(0, kHex);
  return std::all_of(name->begin(), name->end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::unique_ptr<PackStore> NewLocalPackStore(const std::string& packs_dir) {
  return std::make_unique<LocalPackStore>(packs_dir);
}

}  // namespace wanbackup::pipeline
