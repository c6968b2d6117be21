#include "common/status.h"

#include <cerrno>
#include <cstring>

namespace wanbackup {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kAlreadyExists:
      return "already exists";
    case StatusCode::kPermissionDenied:
      return "permission denied";
    case StatusCode::kAuthFailed:
      return "authentication failed";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kTimeout:
      return "timeout";
    case StatusCode::kBusy:
      return "busy";
    case StatusCode::kIoError:
      return "I/O error";
    case StatusCode::kMediumError:
      return "medium error";
    case StatusCode::kCorruption:
      return "corruption";
    case StatusCode::kUnsupported:
      return "unsupported";
    case StatusCode::kCancelled:
      return "cancelled";
    case StatusCode::kInternal:
      return "internal error";
  }
  return "unknown";
}

Status::Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {
  if (code_ != StatusCode::kOk && message_.empty()) message_ = std::string(StatusCodeName(code_));
  if (code_ == StatusCode::kOk) message_.clear();
}

Status Status::FromErrno(int errno_value, std::string_view what) {
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(errno_value);
  StatusCode code = StatusCode::kIoError;
  switch (errno_value) {
    case ENOENT:
      code = StatusCode::kNotFound;
      break;
    case EEXIST:
      code = StatusCode::kAlreadyExists;
      break;
    case EACCES:
    case EPERM:
      code = StatusCode::kPermissionDenied;
      break;
    case EINVAL:
      code = StatusCode::kInvalidArgument;
      break;
    case ETIMEDOUT:
      code = StatusCode::kTimeout;
      break;
    case ECONNREFUSED:
    case ECONNRESET:
    case EHOSTUNREACH:
    case ENETUNREACH:
      code = StatusCode::kUnavailable;
      break;
    case EBUSY:
    case EWOULDBLOCK:
      code = StatusCode::kBusy;
      break;
    case EINTR:
      code = StatusCode::kCancelled;
      break;
    default:
      break;
  }
  return Status(code, std::move(msg));
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += message_;
  return Status(code_, std::move(msg));
}

Status Status::WithSuffix(std::string_view suffix) const {
  if (ok()) return *this;
  return Status(code_, message_ + std::string(suffix));
}

std::string Status::ToString() const {
  return ok() ? std::string("OK") : message_;
}

}  // namespace wanbackup
