// Status: the outcome of an operation that can fail, as a value (see docs/architecture.md).
//
// A Status is either OK (cheap: no allocation) or carries a StatusCode naming the kind of
// failure plus a one-line human message. C library errors are converted into a Status at the
// module boundary, with the library's own message. Immutable; safe to copy between threads.
#pragma once

#include <string>
#include <string_view>

namespace wanbackup {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller asked for something malformed or impossible
  kNotFound,          // target, LUN, file, snapshot ... does not exist
  kAlreadyExists,     // refuses to overwrite something that exists
  kPermissionDenied,  // authorization (not authentication) failure, file modes
  kAuthFailed,        // wrong CHAP secret, wrong passphrase
  kUnavailable,       // peer unreachable or connection lost; may succeed on retry
  kTimeout,           // peer did not answer within the deadline
  kBusy,              // resource held by someone else (target busy, repository locked)
  kIoError,           // local or remote I/O failed
  kMediumError,       // the storage medium reported unreadable/unwritable data
  kCorruption,        // stored data failed an integrity check
  kUnsupported,       // the peer or platform lacks a needed feature
  kCancelled,         // stopped on request (signal, user)
  kInternal,          // a bug: an invariant did not hold
};

// Returns a short stable name, e.g. "not found".
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return {StatusCode::kInvalidArgument, std::move(msg)};
  }
  static Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  static Status AlreadyExists(std::string msg) {
    return {StatusCode::kAlreadyExists, std::move(msg)};
  }
  static Status PermissionDenied(std::string msg) {
    return {StatusCode::kPermissionDenied, std::move(msg)};
  }
  static Status AuthFailed(std::string msg) { return {StatusCode::kAuthFailed, std::move(msg)}; }
  static Status Unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
  static Status Timeout(std::string msg) { return {StatusCode::kTimeout, std::move(msg)}; }
  static Status Busy(std::string msg) { return {StatusCode::kBusy, std::move(msg)}; }
  static Status IoError(std::string msg) { return {StatusCode::kIoError, std::move(msg)}; }
  static Status MediumError(std::string msg) { return {StatusCode::kMediumError, std::move(msg)}; }
  static Status Corruption(std::string msg) { return {StatusCode::kCorruption, std::move(msg)}; }
  static Status Unsupported(std::string msg) { return {StatusCode::kUnsupported, std::move(msg)}; }
  static Status Cancelled(std::string msg) { return {StatusCode::kCancelled, std::move(msg)}; }
  static Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
  // An IoError carrying strerror(errno_value): "<what>: <strerror>".
  static Status FromErrno(int errno_value, std::string_view what);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<context>: <message>"; OK stays OK.
  Status WithContext(std::string_view context) const;
  // Returns a copy whose message is "<message><suffix>"; OK stays OK.
  Status WithSuffix(std::string_view suffix) const;

  // "OK" or the message (the code is implied by the message; see StatusCodeName for logs).
  std::string ToString() const;

  friend bool operator==(const Status& a, const Status& b) = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace wanbackup

// Returns from the enclosing function when `expr` (a Status) is not OK.
#define WB_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::wanbackup::Status wb_status_ = (expr); \
    if (!wb_status_.ok()) return wb_status_; \
  } while (false)
