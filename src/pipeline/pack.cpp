#include "pipeline/pack.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/failpoint.h"

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

}  // namespace

Result<std::unique_ptr<PackWriter>> PackWriter::Create(const std::string& path,
                                                       const std::string& repository_id) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, "creating pack " + path);
  std::unique_ptr<PackWriter> w(new PackWriter(fd, path));
  uint8_t header[kPackHeaderSize] = {};
  std::memcpy(header, kPackMagic, sizeof kPackMagic);
  if (!FromHex(repository_id, header + 8, 16)) {
    return Status::Internal("bad repository id " + repository_id);
  }
  WB_RETURN_IF_ERROR(WriteAll(fd, header, sizeof header, path));
  w->size_ = sizeof header;
  return w;
}

PackWriter::~PackWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Result<uint64_t> PackWriter::Append(const uint8_t* data, size_t size) {
  const uint64_t offset = size_;
  WB_RETURN_IF_ERROR(WriteAll(fd_, data, size, path_));
  size_ += size;
  return offset;
}

Status PackWriter::Sync() {
  if (WB_INJECT_ERROR("pack.fdatasync")) return Status::FromErrno(EIO, "flushing " + path_);
  if (::fdatasync(fd_) != 0) return Status::FromErrno(errno, "flushing " + path_);
  return Status::Ok();
}

Status CheckPackHeader(int fd, const std::string& repository_id, const std::string& path) {
  uint8_t header[kPackHeaderSize];
  Status s = PreadAll(fd, header, sizeof header, 0);
  if (!s.ok()) return s.WithContext(path);
  uint8_t id[16];
  if (std::memcmp(header, kPackMagic, sizeof kPackMagic) != 0 || !FromHex(repository_id, id, 16) ||
      std::memcmp(header + 8, id, 16) != 0) {
    return Status::Corruption(path + " is not a pack of this repository");
  }
  return Status::Ok();
}

Result<RecordHeader> ReadRecordAt(int fd, uint64_t offset, uint32_t stored_size,
                                  std::vector<uint8_t>* buffer) {
  // The size comes from the catalog or a header and sizes the buffer: no record is larger
  // than kMaxRecordPayload, nor reaches past the end of the file.
  if (stored_size > kMaxRecordPayload) {
    return Status::Corruption("the catalog's record size (" + std::to_string(stored_size) +
                              ") exceeds any chunk's (" + std::to_string(kMaxRecordPayload) + ")");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::FromErrno(errno, "reading a pack");
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (offset > file_size || kRecordHeaderSize + uint64_t{stored_size} > file_size - offset) {
    return Status::Corruption("the pack ends before the record does");
  }
  buffer->resize(kRecordHeaderSize + stored_size);
  WB_RETURN_IF_ERROR(PreadAll(fd, buffer->data(), buffer->size(), offset));
  WB_ASSIGN_OR_RETURN(RecordHeader header, ParseRecordHeader(buffer->data()));
  if (header.stored_size != stored_size) {
    return Status::Corruption("the record's size (" + std::to_string(header.stored_size) +
                              ") differs from the catalog's (" + std::to_string(stored_size) + ")");
  }
  return header;
}

Result<RecordHeader> ReadRecordHeaderAt(int fd, uint64_t offset, uint32_t stored_size) {
  uint8_t bytes[kRecordHeaderSize];
  WB_RETURN_IF_ERROR(PreadAll(fd, bytes, sizeof bytes, offset));
  WB_ASSIGN_OR_RETURN(RecordHeader header, ParseRecordHeader(bytes));
  if (header.stored_size != stored_size) {
    return Status::Corruption("the record's size differs from the catalog's");
  }
  return header;
}

Status ReadPackBytes(int fd, uint64_t offset, uint8_t* data, size_t size) {
  return PreadAll(fd, data, size, offset);
}

}  // namespace wanbackup::pipeline
