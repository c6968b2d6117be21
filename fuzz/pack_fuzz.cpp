// A pack file as `repair catalog` walks it: the pack header, then record headers back to back
// (store/pack.h), read through a file descriptor as from disk.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "fuzz/fuzz_keys.h"
#include "repository/pack_record.h"

using namespace wanbackup::pipeline;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = ::memfd_create("pack", 0);
  if (fd < 0) return 0;
  if (::write(fd, data, size) == static_cast<ssize_t>(size) &&
      CheckPackHeader(fd, wanbackup::fuzz::kRepositoryId, "pack").ok()) {
    uint64_t offset = kPackHeaderSize;
    while (offset + kRecordHeaderSize <= size) {
      uint8_t bytes[kRecordHeaderSize];
      if (!ReadPackBytes(fd, offset, bytes, sizeof bytes).ok()) break;
      auto header = ParseRecordHeader(bytes);
      if (!header.ok() || offset + kRecordHeaderSize + header->stored_size > size) break;
      std::vector<uint8_t> record;
      if (!ReadRecordAt(fd, offset, header->stored_size, &record).ok()) break;
      offset += kRecordHeaderSize + header->stored_size;
    }
  }
  ::close(fd);
  return 0;
}
