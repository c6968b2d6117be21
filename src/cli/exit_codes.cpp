#include "cli/exit_codes.h"

namespace wanbackup::cli {

ExitCode ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return ExitCode::kOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kAlreadyExists:
      return ExitCode::kUsage;
    case StatusCode::kCorruption:
      return ExitCode::kDamaged;
    case StatusCode::kUnavailable:
    case StatusCode::kTimeout:
      return ExitCode::kUnreachable;
    case StatusCode::kAuthFailed:
    case StatusCode::kPermissionDenied:
      return ExitCode::kAuth;
    case StatusCode::kNotFound:
      return ExitCode::kNotFound;
    case StatusCode::kBusy:
      return ExitCode::kBusy;
    case StatusCode::kCancelled:
      return ExitCode::kInterrupted;
    case StatusCode::kIoError:
    case StatusCode::kMediumError:
    case StatusCode::kUnsupported:
    case StatusCode::kInternal:
      return ExitCode::kFailure;
  }
  return ExitCode::kFailure;
}

std::string ExitStatusHelp() {
  return "EXIT STATUS:\n"
         "  0    success\n"
         "  1    failure (I/O error, target error, internal error)\n"
         "  2    bad command line or bad input; nothing was changed\n"
         "  3    data failed an integrity check\n"
         "  4    target unreachable, connection lost, or no answer in time\n"
         "  5    authentication or authorization refused\n"
         "  6    target, LUN, repository, snapshot or file not found\n"
         "  7    busy: the repository is locked by another command (the message names it:\n"
         "       pid, host, command, since; --lock-wait waits for it), or the target is busy\n"
         "  130  interrupted (SIGINT/SIGTERM); committed state is intact\n";
}

}  // namespace wanbackup::cli
