#include "cli/copy_credentials.h"

#include "initiator/iscsi_url.h"

namespace wanbackup::cli {
namespace {

// The user an iSCSI URL names ("" for a path, or a URL that does not parse: opening it says why).
std::string UrlUser(const std::string& spec) {
  if (!initiator::LooksLikeIscsiUrl(spec)) return "";
  Result<initiator::IscsiUrl> url = initiator::ParseIscsiUrl(spec);
  return url.ok() ? url->user : "";
}

TargetFlags WithoutChap(TargetFlags flags) {
  flags.chap_secret_file.clear();
  flags.target_chap_user.clear();
  flags.target_chap_secret_file.clear();
  return flags;
}

bool HasMutual(const TargetFlags& flags) {
  return !flags.target_chap_user.empty() || !flags.target_chap_secret_file.empty();
}

}  // namespace

Result<CopyEndFlags> ResolveCopyCredentials(const std::string& source,
                                            const std::string& destination,
                                            const CopyCredentialFlags& flags) {
  const TargetFlags& shared = flags.shared;
  const bool source_user = !UrlUser(source).empty();
  const bool destination_user = !UrlUser(destination).empty();
  const bool per_end =
      !flags.source_chap_secret_file.empty() || !flags.destination_chap_secret_file.empty();
  const bool both_luns =
      initiator::LooksLikeIscsiUrl(source) && initiator::LooksLikeIscsiUrl(destination);

  if (per_end) {
    if (!shared.chap_secret_file.empty()) {
      return Status::InvalidArgument(
          "--chap-secret-file and --source/--destination-chap-secret-file both given; use the "
          "per-end flags only");
    }
    if (!shared.chap_user.empty()) {
      return Status::InvalidArgument(
          "--chap-user names one user for both ends; with per-end secrets name each end's user in "
          "its URL (iscsi://user@host/...)");
    }
    if (!flags.source_chap_secret_file.empty() && !source_user) {
      return Status::InvalidArgument(
          "--source-chap-secret-file: the source URL names no CHAP user (iscsi://user@host/...)");
    }
    if (!flags.destination_chap_secret_file.empty() && !destination_user) {
      return Status::InvalidArgument(
          "--destination-chap-secret-file: the destination URL names no CHAP user "
          "(iscsi://user@host/...)");
    }
  } else if (both_luns && shared.chap_user.empty() && source_user && destination_user &&
             !shared.chap_secret_file.empty()) {
    return Status::InvalidArgument(
        "both URLs name a CHAP user, so --chap-secret-file is ambiguous: give each end its secret "
        "with --source-chap-secret-file and --destination-chap-secret-file");
  }
  if (both_luns && shared.chap_user.empty() && source_user && destination_user &&
      HasMutual(shared)) {
    return Status::InvalidArgument(
        "both URLs name a CHAP user, so the mutual CHAP flags (--target-chap-user, "
        "--target-chap-secret-file) are ambiguous; copy through a file to use mutual CHAP at "
        "one end");
  }

  CopyEndFlags ends{shared, shared};
  if (per_end) {
    ends.source.chap_secret_file = flags.source_chap_secret_file;
    ends.destination.chap_secret_file = flags.destination_chap_secret_file;
  }
  // With a LUN at both ends and one user, the CHAP flags are that end's: the other logs in
  // without CHAP. (Without any user the flags stay, and BuildConnectionOptions refuses a secret
  // file for nobody before any login.)
  if (both_luns && shared.chap_user.empty() && source_user != destination_user) {
    if (source_user) {
      ends.destination = WithoutChap(ends.destination);
    } else {
      ends.source = WithoutChap(ends.source);
    }
  }
  return ends;
}

}  // namespace wanbackup::cli
