#include "store/s3_url.h"

#include <algorithm>
#include <charconv>

namespace wanbackup::pipeline {
namespace {

bool ValidBucket(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return false;
  const auto ok = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
  };
  return std::all_of(b.begin(), b.end(), ok) && b.front() != '.' && b.front() != '-' &&
         b.back() != '.' && b.back() != '-';
}

// Path segments of the prefix: no empty, "." or ".." segment, no characters that would need
// escaping in a key we build (the prefix is ours to choose).
bool ValidPrefix(const std::string& p) {
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = std::min(p.find('/', start), p.size());
    const std::string seg = p.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    const auto ok = [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '-' || c == '_';
    };
    if (!std::all_of(seg.begin(), seg.end(), ok)) return false;
    start = end + 1;
  }
  return true;
}

// `url` with what stands before an '@' in its authority (a user and secret someone put there)
// left out: a message never repeats a secret.
std::string Redacted(const std::string& url) {
  const size_t scheme = url.find("//");
  const size_t from = scheme == std::string::npos ? 0 : scheme + 2;
  const size_t at = url.find('@', from);
  if (at == std::string::npos || at > url.find('/', from)) return url;
  return url.substr(0, from) + "…" + url.substr(at);
}

Status Bad(const std::string& url, const std::string& why) {
  return Status::InvalidArgument("bad S3 URL '" + Redacted(url) + "': " + why +
                                 " (expected s3:http[s]://HOST[:PORT]/BUCKET[/PREFIX])");
}

// Splits "host[:port]" or "[v6]:port" into host and port.
Status ParseAuthority(const std::string& url, const std::string& authority, S3Location* loc) {
  std::string port_text;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) return Bad(url, "unclosed '[' in the host");
    loc->host = authority.substr(1, close - 1);
    const std::string rest = authority.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return Bad(url, "junk after the IPv6 address");
    if (!rest.empty()) port_text = rest.substr(1);
  } else {
    const size_t colon = authority.find(':');
    loc->host = authority.substr(0, colon);
    if (colon != std::string::npos) port_text = authority.substr(colon + 1);
  }
  if (loc->host.empty()) return Bad(url, "no host");
  loc->port = loc->https ? 443 : 80;
  if (authority.find(':') != std::string::npos && authority.front() != '[' && port_text.empty()) {
    return Bad(url, "empty port");
  }
  if (!port_text.empty()) {
    unsigned value = 0;
    const auto [end, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 ||
        value > 65535) {
      return Bad(url, "bad port '" + port_text + "'");
    }
    loc->port = static_cast<uint16_t>(value);
  }
  return Status::Ok();
}

}  // namespace

bool IsS3Url(const std::string& url) {
  return url.rfind("s3:", 0) == 0;
}

Result<S3Location> ParseS3Url(const std::string& url) {
  S3Location loc;
  std::string rest;
  if (url.rfind("s3:http://", 0) == 0) {
    rest = url.substr(10);
  } else if (url.rfind("s3:https://", 0) == 0) {
    loc.https = true;
    rest = url.substr(11);
  } else {
    return Bad(url, "it must start with s3:http:// or s3:https://");
  }
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  if (authority.find('@') != std::string::npos) {
    return Bad(url,
               "credentials do not belong in the URL (use AWS_ACCESS_KEY_ID and "
               "AWS_SECRET_ACCESS_KEY)");
  }
  WB_RETURN_IF_ERROR(ParseAuthority(url, authority, &loc));
  std::string path = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (path.find_first_of("?#") != std::string::npos) return Bad(url, "no query or fragment");
  while (!path.empty() && path.back() == '/')
    path.pop_back();
  const size_t bucket_end = path.find('/');
  loc.bucket = path.substr(0, bucket_end);
  if (loc.bucket.empty()) return Bad(url, "no bucket");
  if (!ValidBucket(loc.bucket)) return Bad(url, "bad bucket name '" + loc.bucket + "'");
  if (bucket_end != std::string::npos) {
    loc.prefix = path.substr(bucket_end + 1);
    if (!ValidPrefix(loc.prefix)) return Bad(url, "bad prefix '" + loc.prefix + "'");
  }
  return loc;
}

std::string S3Location::Endpoint() const {
  const bool v6 = host.find(':') != std::string::npos;
  std::string out = https ? "https://" : "http://";
  out += v6 ? "[" + host + "]" : host;
  out += ":";
  out += std::to_string(port);
  return out;
}

std::string S3Location::Key(const std::string& name) const {
  return prefix.empty() ? name : prefix + "/" + name;
}

std::string S3Location::ToString() const {
  std::string out = "s3:" + Endpoint() + "/" + bucket;
  if (!prefix.empty()) out += "/" + prefix;
  return out;
}

}  // namespace wanbackup::pipeline
