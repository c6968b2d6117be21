// The first session of a transfer: log in, describe the LUN, refuse what is not a disk, and time
// the round trip. Shared by IscsiSource (reading) and IscsiSink (writing). Same threading as
// Connection.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/result.h"
#include "initiator/connection_options.h"
#include "initiator/internal/connection.h"
#include "initiator/lun_info.h"

namespace wanbackup::initiator::internal {

struct OpenedLun {
  std::unique_ptr<Connection> conn;
  LunInfo lun;
  std::chrono::nanoseconds rtt{0};
  std::string name;  // iscsi://host:port/target/lun, without secrets
};

// `what` says what the LUN is opened for, in the message when no target is named ("reading").
Result<OpenedLun> OpenDiskLun(const ConnectionOptions& options, int lun, const std::string& what);

}  // namespace wanbackup::initiator::internal
