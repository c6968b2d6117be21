// Opening what a command writes to: an iSCSI URL (with the connection and tuning flags) or a
// local file/block device/stdout. Shared by copy and restore.
#pragma once

#include <memory>
#include <string>

#include "cli/target_flags.h"
#include "cli/tuning_flags.h"
#include "common/block_io.h"
#include "initiator/iscsi_sink.h"

namespace wanbackup::cli {

struct OpenedSink {
  std::unique_ptr<BlockSink> sink;
  initiator::IscsiSink* lun = nullptr;  // the same sink, when it is a LUN (for its stats)
  bool created = false;                 // a file that did not exist and was created
  std::string tuning_explanation;       // iSCSI only: what autotune chose and why
};

// What becomes of an existing regular file (a LUN or device is always written where it is).
enum class ExistingFile {
  kRefuse,   // AlreadyExists, naming --force
  kReplace,  // replaced whole through a temporary file (restore --force)
  kInPlace,  // written where it is, the rest kept (replicate)
};

// `image_size`: the bytes to be written (a LUN must hold them, in whole blocks).
Result<OpenedSink> OpenSink(const std::string& spec, uint64_t image_size, ExistingFile existing,
                            const TargetFlags& target, const TuningFlags& tuning);

}  // namespace wanbackup::cli
