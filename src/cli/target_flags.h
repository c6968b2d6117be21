// Command-line flags shared by every command that talks to an iSCSI target (probe, copy,
// snapshot, restore to a LUN), and their conversion into initiator::ConnectionOptions.
//
// CHAP secrets come from a file (--chap-secret-file) or the environment (WANBACKUP_CHAP_SECRET,
// WANBACKUP_TARGET_CHAP_SECRET); a secret inside the URL works but draws a warning, because
// the process list shows it to every local user.
#pragma once

#include <string>

#include "common/result.h"
#include "initiator/connection_options.h"
#include "initiator/iscsi_url.h"

namespace CLI {
class App;
}

namespace wanbackup::cli {

inline constexpr const char kChapSecretEnv[] = "WANBACKUP_CHAP_SECRET";
inline constexpr const char kTargetChapSecretEnv[] = "WANBACKUP_TARGET_CHAP_SECRET";

struct TargetFlags {
  std::string chap_user;
  std::string chap_secret_file;
  std::string target_chap_user;
  std::string target_chap_secret_file;
  std::string initiator_name;
  std::string header_digest = "auto";
  std::string login_timeout = "15s";
  std::string command_timeout = "30s";
};

void AddTargetFlags(CLI::App* command, TargetFlags* flags);

// Combines the URL (host, port, target, optional user[%secret]) with the flags. Reads secret
// files; prints warnings (secret in URL, loose file mode) through PrintWarning.
Result<initiator::ConnectionOptions> BuildConnectionOptions(initiator::IscsiUrl url,
                                                            const TargetFlags& flags);

}  // namespace wanbackup::cli
