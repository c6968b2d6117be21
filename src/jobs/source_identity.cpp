#include "jobs/source_identity.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "initiator/iscsi_url.h"

namespace wanbackup::jobs {

std::string SourceIdentity(const std::string& source) {
  if (initiator::LooksLikeIscsiUrl(source)) {
    const Result<initiator::IscsiUrl> url = initiator::ParseLunUrl(source);
    if (url.ok()) {
      // IQNs compare without regard to case (RFC 3722 folds them to lower case).
      std::string target = url->target;
      std::transform(target.begin(), target.end(), target.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      return "iscsi:" + target + "/" + std::to_string(url->lun.value_or(0));
    }
    return "path:" + source;
  }
  struct stat st {};
  if (::stat(source.c_str(), &st) == 0) {
    if (S_ISBLK(st.st_mode)) {
      return "block:" + std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
    }
    return "file:" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  }
  return "path:" + std::filesystem::path(source).lexically_normal().string();
}

}  // namespace wanbackup::jobs
