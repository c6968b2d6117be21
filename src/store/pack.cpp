#include "store/pack.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/failpoint.h"
#include "common/hex.h"

namespace wanbackup::pipeline {
namespace {

constexpr char kPackMagic[8] = {'W', 'B', 'P', 'A', 'C', 'K', '0', '1'};

Status WriteAll(int fd, const uint8_t* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "writing " + path);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status PreadAll(int fd, uint8_t* data, size_t size, uint64_t offset) {
  while (size > 0) {
    const ssize_t n = ::pread(fd, data, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "reading a pack");
    }
    if (n == 0) return Status::Corruption("the pack ends before the record does");
    data += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

// A pack in a local file.
class LocalPackWriter final : public PackWriter {
 public:
  LocalPackWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~LocalPackWriter() override {
    if (fd_ >= 0) ::close(fd_);
  }
  LocalPackWriter(const LocalPackWriter&) = delete;
  LocalPackWriter& operator=(const LocalPackWriter&) = delete;

  Result<uint64_t> Append(const uint8_t* data, size_t size) override {
    const uint64_t offset = size_;
    WB_RETURN_IF_ERROR(WriteAll(fd_, data, size, path_));
    size_ += size;
    return offset;
  }
  Status Sync() override {
    if (WB_INJECT_ERROR("pack.fdatasync")) return Status::FromErrno(EIO, "flushing " + path_);
    if (::fdatasync(fd_) != 0) return Status::FromErrno(errno, "flushing " + path_);
    return Status::Ok();
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  void set_size(uint64_t size) { size_ = size; }

 private:
  int fd_;
  std::string path_;
  uint64_t size_ = 0;
};

}  // namespace

Status FdPackReader::ReadAt(uint64_t offset, uint8_t* data, size_t size) const {
  return PreadAll(fd_, data, size, offset);
}

Result<uint64_t> FdPackReader::Size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return Status::FromErrno(errno, "reading a pack");
  return static_cast<uint64_t>(st.st_size);
}

Result<std::unique_ptr<PackWriter>> PackWriter::Create(const std::string& path,
                                                       const std::string& repository_id) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, "creating pack " + path);
  auto w = std::make_unique<LocalPackWriter>(fd, path);
  uint8_t header[kPackHeaderSize] = {};
  WB_RETURN_IF_ERROR(MakePackHeader(repository_id, header));
  WB_RETURN_IF_ERROR(WriteAll(fd, header, sizeof header, path));
  w->set_size(sizeof header);
  return std::unique_ptr<PackWriter>(std::move(w));
}

Status MakePackHeader(const std::string& repository_id, uint8_t (&header)[kPackHeaderSize]) {
  std::memset(header, 0, kPackHeaderSize);
  std::memcpy(header, kPackMagic, sizeof kPackMagic);
  if (!FromHex(repository_id, header + 8, 16)) {
    return Status::Internal("bad repository id " + repository_id);
  }
  return Status::Ok();
}

Status CheckPackHeader(const PackReader& pack, const std::string& repository_id,
                       const std::string& path) {
  uint8_t header[kPackHeaderSize];
  Status s = pack.ReadAt(0, header, sizeof header);
  if (!s.ok()) return s.WithContext(path);
  uint8_t id[16];
  if (std::memcmp(header, kPackMagic, sizeof kPackMagic) != 0 || !FromHex(repository_id, id, 16) ||
      std::memcmp(header + 8, id, 16) != 0) {
    return Status::Corruption(path + " is not a pack of this repository");
  }
  return Status::Ok();
}

Status ReadPackBytes(int fd, uint64_t offset, uint8_t* data, size_t size) {
  return PreadAll(fd, data, size, offset);
}

Status CheckPackHeader(int fd, const std::string& repository_id, const std::string& path) {
  return CheckPackHeader(FdPackReader(fd), repository_id, path);
}

}  // namespace wanbackup::pipeline
