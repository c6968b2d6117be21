// The one place where libiscsi and SCSI failures become Status values (internal to initiator).
//
// Also decides which failures are transient (worth a retry on the same or a new connection):
// BUSY, TASK SET FULL, UNIT ATTENTION, NOT READY "becoming ready", timeouts and transport
// errors. Medium/hardware errors and illegal requests are permanent. Thread-safe (pure).
#pragma once

#include <string_view>

#include "common/status.h"

struct iscsi_context;
struct scsi_task;

namespace wanbackup::initiator::internal {

// Status of a finished SCSI task. `status` is the callback's status; `task` may be null.
// `what` names the command and range, e.g. "READ(16) LBA 0+8192".
Status TaskStatus(int status, const scsi_task* task, iscsi_context* iscsi, std::string_view what);

// Status of a failed connect/login, from libiscsi's error text (it reports the login status
// class/detail only as text, e.g. "... Status: Authentication failure(513)").
Status LoginStatus(std::string_view libiscsi_error, std::string_view portal,
                   std::string_view target);

// True when retrying the same command may succeed.
bool IsTransient(const Status& status);

}  // namespace wanbackup::initiator::internal
