// FileSink: writes to a regular file, a block device, a character device (/dev/null) or
// standard output ("-"). Write() may be called from several threads at once when the sink is
// not sequential_only() (positioned writes); Finish() from one thread after all writes.
//
// Safety rules (the demanding user's): an existing regular file is not overwritten without
// `overwrite`; a block device is opened with O_EXCL, so the kernel refuses one that is mounted
// or held by LVM/RAID, and it must be at least as large as the data; new files are created
// mode 0600 (disk images hold everything the disk held), with O_EXCL, and are sparse where zeros
// are skipped; Finish() truncates to the final size and fsyncs before reporting success. An
// existing regular file is replaced only whole: the data goes to a temporary file beside it
// (O_EXCL, 0600), which Finish() fsyncs and renames over it, then fsyncs the directory; a sink
// destroyed before that removes the temporary file and leaves the old one untouched. The path is
// resolved without following a symlink another user could have planted (common/safe_path.h:
// refused, one line), and the file is then opened, created and renamed relative to its
// directory with O_NOFOLLOW. A FIFO is opened without waiting for a reader (none: refused), and
// one by name that another user could have planted (theirs, in a directory others can write) is
// refused.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/block_io.h"
#include "common/unique_fd.h"

namespace wanbackup::pipeline {

struct FileSinkOptions {
  bool overwrite = false;  // allow replacing an existing regular file
  // Write an existing regular file where it is, keeping what is not written (replicate); it is
  // created when missing. Finish() still sets the size and fsyncs.
  bool in_place = false;
  uint64_t expected_size = 0;  // refuse a block device smaller than this
};

class FileSink : public BlockSink {
 public:
  static Result<std::unique_ptr<FileSink>> Open(const std::string& path,
                                                const FileSinkOptions& options);
  ~FileSink() override;

  const std::string& name() const override { return name_; }
  bool sequential_only() const override { return sequential_; }
  bool zeros_are_free() const override { return zeros_free_; }
  // True when Open created the file (it did not exist).
  bool created() const { return created_; }
  // What the user should hear about how the file was written (another user's file replaced by
  // one they cannot read), or "".
  const std::string& notice() const { return notice_; }
  Status Write(uint64_t offset, const uint8_t* data, size_t length) override;
  Status Finish(uint64_t total_size) override;

 private:
  FileSink() = default;
  Status OpenBlockDevice(uint64_t expected_size);
  Status OpenInPlace();
  Status OpenReplacement(const struct stat& replaced);
  Status KeepOwner(const struct stat& replaced);
  Status OpenStream();
  Status OpenExisting(const struct stat& st, const FileSinkOptions& options);
  Status RefuseRenamedIn(const struct stat& st) const;
  std::string name_;
  // The directory that holds the file, reached without following a link another user planted
  // (common/safe_path.h), and the file's name in it: every open, create and rename is relative
  // to it, with O_NOFOLLOW.
  UniqueFd dir_;
  std::string dir_path_, file_name_;
  bool proc_link_ = false;  // file_name_ is a /proc link to a pipe or socket: opened following it
  int fd_ = -1;
  bool owns_fd_ = true;
  bool sequential_ = false;
  bool zeros_free_ = false;
  bool regular_ = false;
  bool block_device_ = false;
  bool created_ = false;
  // A file this sink created for a whole image (not a replica): removed when the sink goes
  // before Finish (disk full, a damaged chunk, an interrupt), so no partial image is left that
  // looks like a restored or copied disk.
  bool remove_unfinished_ = false;
  bool sync_dir_ = false;  // a file this sink created or replaced: its directory synced by Finish
  std::string notice_;
  std::string temp_name_;  // replacing a file: written here (in dir_), renamed over file_name_
  uint64_t position_ = 0;  // sequential sinks: the next offset expected
};

}  // namespace wanbackup::pipeline
