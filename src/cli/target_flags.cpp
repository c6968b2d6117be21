#include "cli/target_flags.h"

#include <CLI/CLI.hpp>

#include "cli/console.h"
#include "common/units.h"

namespace wanbackup::cli {
namespace {

// Secret precedence: file flag, then environment; `what` names it in messages.
Result<Secret> LoadSecret(const std::string& file, const char* env, const std::string& what) {
  if (!file.empty()) {
    Result<Secret> secret = ReadSecretFile(file);
    if (!secret.ok()) return secret.status().WithContext(what);
    return secret;
  }
  return SecretFromEnv(env);
}

Result<std::chrono::milliseconds> ParseTimeout(const std::string& text, const char* flag) {
  Result<std::chrono::nanoseconds> d = ParseDuration(text, "s");
  if (!d.ok()) return d.status().WithContext(flag);
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*d);
  if (ms.count() <= 0) return Status::InvalidArgument(std::string(flag) + ": must be positive");
  return ms;
}

}  // namespace

void AddTargetFlags(CLI::App* command, TargetFlags* flags) {
  const char* group = "iSCSI connection";
  command
      ->add_option("--chap-user", flags->chap_user,
                   "CHAP user name (or user@ in the URL); the secret comes from "
                   "--chap-secret-file or $WANBACKUP_CHAP_SECRET")
      ->group(group);
  command
      ->add_option(
          "--chap-secret-file", flags->chap_secret_file,
          "file whose first line is the CHAP secret (mode 0600, yours or root's; else refused)")
      ->group(group);
  command
      ->add_option("--target-chap-user", flags->target_chap_user,
                   "mutual CHAP: the name the target must prove; secret from "
                   "--target-chap-secret-file or $WANBACKUP_TARGET_CHAP_SECRET")
      ->group(group);
  command
      ->add_option("--target-chap-secret-file", flags->target_chap_secret_file,
                   "file whose first line is the target's mutual CHAP secret")
      ->group(group);
  command
      ->add_option("--initiator-name", flags->initiator_name,
                   "initiator IQN (default: iqn.2026-11.org.wanbackup:<hostname>)")
      ->group(group);
  command
      ->add_option("--header-digest", flags->header_digest,
                   "CRC32C header digest: none, crc32c (the login fails without it), or auto "
                   "(target chooses)")
      ->check(CLI::IsMember({"none", "crc32c", "auto"}))
      ->capture_default_str()
      ->group(group);
  command
      ->add_option("--login-timeout", flags->login_timeout,
                   "give up when connect + login take longer (e.g. 15s, 500ms)")
      ->capture_default_str()
      ->group(group);
  command
      ->add_option("--timeout", flags->command_timeout,
                   "give up on a SCSI command unanswered for this long")
      ->capture_default_str()
      ->group(group);
}

Result<initiator::ConnectionOptions> BuildConnectionOptions(initiator::IscsiUrl url,
                                                            const TargetFlags& flags) {
  initiator::ConnectionOptions options;
  if (!url.password.empty()) {
    PrintWarning(
        "the CHAP secret in the URL is visible to every local user in the process "
        "list; use --chap-secret-file or $WANBACKUP_CHAP_SECRET instead");
  }
  initiator::ApplyUrl(url, &options);
  if (!flags.chap_user.empty()) {
    if (!url.user.empty() && url.user != flags.chap_user) {
      return Status::InvalidArgument("CHAP user given twice: '" + url.user + "' in the URL and '" +
                                     flags.chap_user + "' in --chap-user");
    }
    options.chap.user = flags.chap_user;
  }
  WB_ASSIGN_OR_RETURN(Secret secret,
                      LoadSecret(flags.chap_secret_file, kChapSecretEnv, "--chap-secret-file"));
  if (!secret.empty()) options.chap.secret = std::move(secret);
  if (!options.chap.user.empty() && options.chap.secret.empty()) {
    return Status::InvalidArgument("CHAP user '" + options.chap.user +
                                   "' needs a secret: --chap-secret-file FILE or $" +
                                   kChapSecretEnv);
  }
  if (options.chap.user.empty() && !flags.chap_secret_file.empty()) {
    return Status::InvalidArgument("--chap-secret-file needs --chap-user (or user@ in the URL)");
  }

  options.chap.target_user = flags.target_chap_user;
  WB_ASSIGN_OR_RETURN(
      Secret target_secret,
      LoadSecret(flags.target_chap_secret_file, kTargetChapSecretEnv, "--target-chap-secret-file"));
  options.chap.target_secret = std::move(target_secret);
  if (!options.chap.target_user.empty()) {
    if (options.chap.user.empty()) {
      return Status::InvalidArgument("mutual CHAP (--target-chap-user) needs --chap-user too");
    }
    if (options.chap.target_secret.empty()) {
      return Status::InvalidArgument(
          "--target-chap-user needs a secret: "
          "--target-chap-secret-file FILE or $" +
          std::string(kTargetChapSecretEnv));
    }
  } else if (!flags.target_chap_secret_file.empty()) {
    return Status::InvalidArgument("--target-chap-secret-file needs --target-chap-user");
  }

  options.initiator_name = flags.initiator_name;
  if (flags.header_digest == "none") options.header_digest = initiator::HeaderDigest::kNone;
  if (flags.header_digest == "crc32c") options.header_digest = initiator::HeaderDigest::kCrc32c;
  WB_ASSIGN_OR_RETURN(options.login_timeout, ParseTimeout(flags.login_timeout, "--login-timeout"));
  WB_ASSIGN_OR_RETURN(options.command_timeout, ParseTimeout(flags.command_timeout, "--timeout"));
  return options;
}

}  // namespace wanbackup::cli
