#include "store/pack_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <tuple>

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

class LocalPackStore final : public PackStore {
 public:
  explicit LocalPackStore(std::string dir) : dir_(std::move(dir)) {}

  Result<std::unique_ptr<PackWriter>> Create(const std::string& name,
                                             const std::string& repository_id) override {
    const std::string prefix = dir_ + "/" + name.substr(0, 2);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::FromErrno(errno, "creating " + prefix);
    }
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
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return Status::Corruption("pack file " + path + " is missing");
      return Status::FromErrno(errno, "opening " + path);
    }
    return std::unique_ptr<PackReader>(std::make_unique<LocalPackReader>(fd));
  }

  Result<std::vector<StoredPack>> List() override {
    std::vector<StoredPack> packs;
    DIR* top = ::opendir(dir_.c_str());
    if (top == nullptr) return Status::FromErrno(errno, "listing " + dir_);
    while (dirent* sub = ::readdir(top)) {
      const std::string prefix = sub->d_name;
      if (prefix.size() != 2 || prefix[0] == '.') continue;
      const std::string dir = dir_ + "/" + prefix;
      DIR* d = ::opendir(dir.c_str());
      if (d == nullptr) continue;
      while (dirent* e = ::readdir(d)) {
        StoredPack p;
        if (!IsPackFileName(e->d_name, &p.name) || p.name.compare(0, 2, prefix) != 0) continue;
        struct stat st {};
        if (::stat((dir + "/" + e->d_name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        p.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
        p.size = static_cast<uint64_t>(st.st_size);
        packs.push_back(p);
      }
      ::closedir(d);
    }
    ::closedir(top);
    std::sort(packs.begin(), packs.end(), [](const StoredPack& a, const StoredPack& b) {
      return std::tie(a.mtime_ns, a.name) < std::tie(b.mtime_ns, b.name);
    });
    return packs;
  }

  Status Remove(const std::string& name) override {
    const std::string path = Describe(name);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status::FromErrno(errno, "removing " + path);
    }
    return SyncDir(dir_ + "/" + name.substr(0, 2));
  }

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
