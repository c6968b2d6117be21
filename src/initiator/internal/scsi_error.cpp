#include "initiator/internal/scsi_error.h"

#include <cstdio>
#include <string>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

namespace wanbackup::initiator::internal {
namespace {

std::string SenseText(const scsi_task& task) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s, ASC/ASCQ 0x%02x/0x%02x (%s)",
                scsi_sense_key_str(task.sense.key), (task.sense.ascq >> 8) & 0xff,
                task.sense.ascq & 0xff, scsi_sense_ascq_str(task.sense.ascq));
  return buf;
}

}  // namespace

Status TaskStatus(int status, const scsi_task* task, iscsi_context* iscsi, std::string_view what) {
  const std::string prefix = std::string(what) + ": ";
  switch (status) {
    case SCSI_STATUS_GOOD:
    case SCSI_STATUS_CONDITION_MET:
      return Status::Ok();
    case SCSI_STATUS_BUSY:
      return Status::Busy(prefix + "target busy");
    case SCSI_STATUS_TASK_SET_FULL:
      return Status::Busy(prefix + "target task set full");
    case SCSI_STATUS_RESERVATION_CONFLICT:
      return Status::Busy(prefix + "reservation conflict (another initiator holds the LUN)");
    case SCSI_STATUS_TASK_ABORTED:
      return Status::Unavailable(prefix + "command aborted by the target");
    case SCSI_STATUS_CANCELLED:
      return Status::Cancelled(prefix + "cancelled (connection closed)");
    case SCSI_STATUS_TIMEOUT:
      return Status::Timeout(prefix + "no answer from the target in time");
    case SCSI_STATUS_CHECK_CONDITION: {
      if (task == nullptr) return Status::IoError(prefix + "check condition");
      const std::string sense = prefix + SenseText(*task);
      switch (task->sense.key) {
        case SCSI_SENSE_UNIT_ATTENTION:
        case SCSI_SENSE_NOT_READY:
          return Status::Unavailable(sense);
        case SCSI_SENSE_MEDIUM_ERROR:
        case SCSI_SENSE_HARDWARE_ERROR:
          return Status::MediumError(sense);
        case SCSI_SENSE_DATA_PROTECTION:
          return Status::PermissionDenied(sense);
        case SCSI_SENSE_ILLEGAL_REQUEST:
          if (task->sense.ascq == SCSI_SENSE_ASCQ_LOGICAL_UNIT_NOT_SUPPORTED) {
            return Status::NotFound(prefix + "no such LUN on this target");
          }
          if (task->sense.ascq == SCSI_SENSE_ASCQ_INVALID_OPERATION_CODE) {
            return Status::Unsupported(sense);
          }
          return Status::InvalidArgument(sense);
        case SCSI_SENSE_COMMAND_ABORTED:
          return Status::Unavailable(sense);
        default:
          return Status::IoError(sense);
      }
    }
    default: {
      const char* err = iscsi != nullptr ? iscsi_get_error(iscsi) : nullptr;
      return Status::Unavailable(prefix + (err != nullptr && *err ? err : "transport error"));
    }
  }
}

Status LoginStatus(std::string_view libiscsi_error, std::string_view portal,
                   std::string_view target) {
  const std::string where =
      target.empty() ? std::string(portal) : std::string(target) + " at " + std::string(portal);
  const std::string err(libiscsi_error);
  // Login status numbers as libiscsi prints them: "...(513)".
  auto has = [&err](const char* code) { return err.find(code) != std::string::npos; };
  if (has("(513)")) {
    return Status::AuthFailed("login to " + where + " refused: CHAP authentication failed");
  }
  if (has("(514)")) {
    return Status::PermissionDenied("login to " + where +
                                    " refused: this initiator is not authorized");
  }
  if (has("(515)") || has("(516)")) {
    return Status::NotFound("login to " + where + " refused: no such target");
  }
  if (has("(518)")) return Status::Busy("login to " + where + " refused: too many connections");
  if (has("(769)") || has("(770)")) {
    return Status::Unavailable("login to " + where + " refused: target out of service/resources");
  }
  if (err.find("mutual") != std::string::npos || err.find("CHAP") != std::string::npos) {
    return Status::AuthFailed("login to " + where + " failed: " + err);
  }
  if (err.find("refused") != std::string::npos) {
    return Status::Unavailable("cannot connect to " + std::string(portal) + ": connection refused");
  }
  return Status::Unavailable("cannot log in to " + where + ": " + err);
}

bool IsTransient(const Status& status) {
  switch (status.code()) {
    case StatusCode::kBusy:
    case StatusCode::kUnavailable:
    case StatusCode::kTimeout:
      return true;
    default:
      return false;
  }
}

}  // namespace wanbackup::initiator::internal
