// wanbackup's exit codes: one table, documented in `wanbackup --help` and docs/operations.md.
#pragma once

#include <string>

#include "common/status.h"

namespace wanbackup::cli {

enum class ExitCode : int {
  kOk = 0,            // everything asked for was done
  kFailure = 1,       // failed (I/O error, target error, internal error)
  kUsage = 2,         // bad command line or bad input; nothing was changed
  kDamaged = 3,       // data failed an integrity check (verify found damage)
  kUnreachable = 4,   // target/peer unreachable, connection lost, or no answer in time
  kAuth = 5,          // authentication or authorization refused (CHAP, passphrase)
  kNotFound = 6,      // target, LUN, repository, snapshot or file does not exist
  kBusy = 7,          // resource busy or locked by another process
  kInterrupted = 130  // stopped by SIGINT/SIGTERM; committed state is intact
};

ExitCode ExitCodeFor(const Status& status);

// The EXIT STATUS section shown at the end of `wanbackup --help`.
std::string ExitStatusHelp();

}  // namespace wanbackup::cli
