#include "initiator/iscsi_url.h"

#include <charconv>

namespace wanbackup::initiator {
namespace {

constexpr std::string_view kScheme = "iscsi://";
constexpr uint64_t kMaxPort = 65535;
constexpr uint64_t kMaxLun = 16383;  // the largest LUN in SAM's flat (14-bit) addressing

Status UrlError(std::string_view text, const std::string& what) {
  // Never echo a password back: show the URL only up to the '@' when there is one.
  std::string shown(text);
  const size_t at = shown.find('@');
  const size_t slash = shown.find('/', kScheme.size());
  if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
    const size_t pct = shown.find('%', kScheme.size());
    if (pct != std::string::npos && pct < at) shown.replace(pct, at - pct, "%<redacted>");
  }
  return Status::InvalidArgument("iSCSI URL '" + shown + "': " + what);
}

bool ParseUnsigned(std::string_view s, uint64_t max, uint64_t* out) {
  if (s.empty()) return false;
  uint64_t value = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size() || value > max) return false;
  *out = value;
  return true;
}

// The URL's parts, in order; `text` is the whole URL, for error messages.

// user[%secret]@ at the start of the authority, which is left without it.
Status ParseUserinfo(std::string_view text, std::string_view* authority, IscsiUrl* url) {
  const size_t at = authority->rfind('@');
  if (at == std::string_view::npos) return Status::Ok();
  std::string_view userinfo = authority->substr(0, at);
  *authority = authority->substr(at + 1);
  const size_t pct = userinfo.find('%');
  url->user = std::string(userinfo.substr(0, pct));
  if (pct != std::string_view::npos) url->password = Secret(userinfo.substr(pct + 1));
  if (url->user.empty()) return UrlError(text, "empty CHAP user before '@'");
  if (pct != std::string_view::npos && url->password.empty()) {
    return UrlError(text, "empty CHAP secret after '%'");
  }
  return Status::Ok();
}

// host, [v6 host], host:port or [v6 host]:port.
Status ParseHostPort(std::string_view text, std::string_view authority, IscsiUrl* url) {
  std::string_view port_text;
  if (authority.starts_with("[")) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return UrlError(text, "unterminated '[' in IPv6 address");
    url->host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return UrlError(text, "unexpected text after ']'");
      port_text = after.substr(1);
      if (port_text.empty()) return UrlError(text, "empty port after ':'");
    }
  } else {
    const size_t colon = authority.find(':');
    url->host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return UrlError(text, "empty port after ':'");
    }
  }
  if (url->host.empty()) return UrlError(text, "no host");
  if (port_text.empty()) return Status::Ok();
  uint64_t port = 0;
  if (!ParseUnsigned(port_text, kMaxPort, &port) || port == 0) {
    return UrlError(text, "port '" + std::string(port_text) + "' is not a number from 1 to 65535");
  }
  url->port = static_cast<uint16_t>(port);
  return Status::Ok();
}

// target-iqn[/lun][/]
Status ParsePath(std::string_view text, std::string_view path, IscsiUrl* url) {
  if (path.ends_with("/")) path.remove_suffix(1);
  if (path.empty()) return Status::Ok();
  const size_t slash = path.find('/');
  url->target = std::string(path.substr(0, slash));
  if (url->target.empty()) return UrlError(text, "empty target name");
  if (slash == std::string_view::npos) return Status::Ok();
  std::string_view lun_text = path.substr(slash + 1);
  if (lun_text.find('/') != std::string_view::npos) {
    return UrlError(text, "too many path parts (form: iscsi://host[:port]/target-iqn/lun)");
  }
  uint64_t lun = 0;
  if (!ParseUnsigned(lun_text, kMaxLun, &lun)) {
    return UrlError(text, "LUN '" + std::string(lun_text) + "' is not a number from 0 to 16383");
  }
  url->lun = static_cast<int>(lun);
  return Status::Ok();
}

}  // namespace

Result<IscsiUrl> ParseLunUrl(std::string_view text) {
  WB_ASSIGN_OR_RETURN(IscsiUrl url, ParseIscsiUrl(text));
  if (url.target.empty() || !url.lun) {
    return Status::InvalidArgument("'" + url.ToDisplayString() +
                                   "' names no LUN: use iscsi://host[:port]/target-iqn/lun "
                                   "(wanbackup probe lists them)");
  }
  return url;
}

bool LooksLikeIscsiUrl(std::string_view text) {
  return text.starts_with(kScheme);
}

std::string IscsiUrl::Portal() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string IscsiUrl::ToDisplayString() const {
  std::string out(kScheme);
  if (!user.empty()) out += user + "@";
  out += Portal();
  if (!target.empty()) out += "/" + target;
  if (lun) out += "/" + std::to_string(*lun);
  return out;
}

Result<IscsiUrl> ParseIscsiUrl(std::string_view text) {
  if (!LooksLikeIscsiUrl(text)) {
    return UrlError(text, "must start with iscsi:// (form: iscsi://host[:port]/target-iqn/lun)");
  }
  IscsiUrl url;
  std::string_view rest = text.substr(kScheme.size());
  if (rest.find('?') != std::string_view::npos) {
    return UrlError(text, "query arguments are not supported; use command-line options instead");
  }
  const size_t path_start = rest.find('/');
  std::string_view authority = rest.substr(0, path_start);
  std::string_view path = path_start == std::string_view::npos ? "" : rest.substr(path_start + 1);
  WB_RETURN_IF_ERROR(ParseUserinfo(text, &authority, &url));
  WB_RETURN_IF_ERROR(ParseHostPort(text, authority, &url));
  WB_RETURN_IF_ERROR(ParsePath(text, path, &url));
  return url;
}

}  // namespace wanbackup::initiator
