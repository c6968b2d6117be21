#include "initiator/connection_options.h"

#include <unistd.h>

namespace wanbackup::initiator {

void ApplyUrl(IscsiUrl& url, ConnectionOptions* options) {
  options->host = url.host;
  options->port = url.port;
  options->target = url.target;
  if (!url.user.empty()) options->chap.user = url.user;
  if (!url.password.empty()) options->chap.secret = std::move(url.password);
}

std::string DefaultInitiatorName() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
    return "iqn.2026-11.org.wanbackup:host";
  std::string name = "iqn.2026-11.org.wanbackup:";
  for (const char* p = host; *p != '\0'; ++p) {
    const char c = *p;
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    name += ok ? c : (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : '-';
  }
  return name;
}

}  // namespace wanbackup::initiator
