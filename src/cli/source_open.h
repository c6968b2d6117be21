// Opening what a command reads from: an iSCSI URL (with the connection and tuning flags) or a
// local file/block device. Shared by copy and snapshot.
#pragma once

#include <memory>
#include <string>

#include "cli/target_flags.h"
#include "cli/tuning_flags.h"
#include "common/block_io.h"

namespace wanbackup::cli {

struct OpenedSource {
  std::unique_ptr<BlockSource> source;
  bool remote = false;
  std::string tuning_explanation;  // iSCSI only: what autotune chose and why
};

// What the source is opened for: kData may skip a thin LUN's deallocated ranges (the reader
// asks, BlockSource::DeallocatedRanges); kReadBack compares every byte and never asks, so no
// GET LBA STATUS session is opened for it.
enum class SourceUse { kData, kReadBack };

// A local path as it is recorded (a snapshot's source, a replica's target): made absolute
// against the working directory, lexically ("a.img" and "/srv/img/a.img" are one disk for
// retention), without resolving symlinks, so a stable name such as /dev/disk/by-id/... stays
// (and "./" and "//" go, but ".." stays: behind a symlink it is not lexical).
// iSCSI URLs, "-" and "" are returned unchanged.
std::string AbsoluteLocalPath(const std::string& spec);

Result<OpenedSource> OpenSource(const std::string& spec, const TargetFlags& target,
                                const TuningFlags& tuning, SourceUse use = SourceUse::kData);

}  // namespace wanbackup::cli
