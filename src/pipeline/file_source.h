// FileSource: a BlockSource over a local regular file or block device, read with pread() by a
// small pool of threads (so reading overlaps with what the consumer does).
// Threading: as BlockSource (one consumer thread); the workers are internal.
#pragma once

#include <memory>
#include <string>

#include "common/block_io.h"

namespace wanbackup::pipeline {

class FileSource : public BlockSource {
 public:
  // A regular file has a block size of 1 (any size works); a block device its logical block
  // size. With `direct`, reads bypass the page cache (O_DIRECT through aligned buffers of its
  // own, so requests need no alignment) to see what the medium holds; where O_DIRECT is refused
  // (tmpfs, some FUSE), the file's cached pages are dropped (POSIX_FADV_DONTNEED, which drops
  // only clean pages: fsync first) and it is read normally.
  static Result<std::unique_ptr<FileSource>> Open(const std::string& path, int threads = 2,
                                                  bool direct = false);
};

}  // namespace wanbackup::pipeline
