#include "store/internal/s3_xml.h"

#include <charconv>
#include <ctime>

namespace wanbackup::pipeline::internal {
namespace {

// The text between <tag> (or <tag attr…>) and </tag>, starting at `from`; *next is past it.
std::optional<std::string> RawElement(const std::string& xml, const std::string& tag, size_t from,
                                      size_t* next) {
  size_t open = from;
  while (true) {
    open = xml.find("<" + tag, open);
    if (open == std::string::npos) return std::nullopt;
    const char after = open + 1 + tag.size() < xml.size() ? xml[open + 1 + tag.size()] : '\0';
    if (after == '>' || after == ' ' || after == '/') break;
    open += 1;  // a longer tag with the same start
  }
  const size_t body = xml.find('>', open);
  if (body == std::string::npos) return std::nullopt;
  if (xml[body - 1] == '/') {  // <tag/>
    if (next != nullptr) *next = body + 1;
    return std::string();
  }
  const std::string close = "</" + tag + ">";
  const size_t end = xml.find(close, body + 1);
  if (end == std::string::npos) return std::nullopt;
  if (next != nullptr) *next = end + close.size();
  return xml.substr(body + 1, end - body - 1);
}

template <typename T>
bool ParseNumber(const std::string& text, T* out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

std::optional<S3ListedObject> ParseContents(const std::string& contents) {
  S3ListedObject o;
  const std::optional<std::string> key = XmlElement(contents, "Key");
  const std::optional<std::string> size = XmlElement(contents, "Size");
  const std::optional<std::string> mtime = XmlElement(contents, "LastModified");
  if (!key || !size || !mtime || !ParseNumber(*size, &o.size)) return std::nullopt;
  const std::optional<int64_t> ns = ParseIso8601(*mtime);
  if (!ns) return std::nullopt;
  o.key = *key;
  o.mtime_ns = *ns;
  return o;
}

}  // namespace

std::optional<std::string> XmlElement(const std::string& xml, const std::string& tag) {
  std::optional<std::string> raw = RawElement(xml, tag, 0, nullptr);
  if (!raw) return std::nullopt;
  return XmlUnescape(*raw);
}

std::string XmlUnescape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out += text[i];
      continue;
    }
    const size_t semi = text.find(';', i);
    if (semi == std::string::npos) {
      out += text.substr(i);
      break;
    }
    const std::string entity = text.substr(i + 1, semi - i - 1);
    unsigned code = 0;
    if (entity == "amp") {
      out += '&';
    } else if (entity == "lt") {
      out += '<';
    } else if (entity == "gt") {
      out += '>';
    } else if (entity == "quot") {
      out += '"';
    } else if (entity == "apos") {
      out += '\'';
    } else if (entity.size() > 1 && entity[0] == '#' && ParseNumber(entity.substr(1), &code) &&
               code > 0 && code < 128) {
      out += static_cast<char>(code);
    } else {
      out += text.substr(i, semi - i + 1);  // left as it is
    }
    i = semi;
  }
  return out;
}

std::optional<int64_t> ParseIso8601(const std::string& text) {
  // YYYY-MM-DDTHH:MM:SS[.fff…]Z
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text.back() != 'Z') {
    return std::nullopt;
  }
  std::tm tm{};
  int fields[6] = {};
  const size_t at[6] = {0, 5, 8, 11, 14, 17};
  const size_t len[6] = {4, 2, 2, 2, 2, 2};
  for (int i = 0; i < 6; ++i) {
    if (!ParseNumber(text.substr(at[i], len[i]), &fields[i])) return std::nullopt;
  }
  tm.tm_year = fields[0] - 1900;
  tm.tm_mon = fields[1] - 1;
  tm.tm_mday = fields[2];
  tm.tm_hour = fields[3];
  tm.tm_min = fields[4];
  tm.tm_sec = fields[5];
  int64_t ns = 0;
  const std::string frac = text.substr(19, text.size() - 20);
  if (!frac.empty()) {
    if (frac[0] != '.' || frac.size() < 2 || frac.size() > 10) return std::nullopt;
    std::string digits = frac.substr(1);
    digits.resize(9, '0');
    if (!ParseNumber(digits, &ns)) return std::nullopt;
  }
  const time_t secs = ::timegm(&tm);
  return int64_t{secs} * 1'000'000'000 + ns;
}

std::optional<S3ListPage> ParseListPage(const std::string& xml) {
  if (xml.find("<ListBucketResult") == std::string::npos) return std::nullopt;
  S3ListPage page;
  size_t pos = 0;
  while (std::optional<std::string> contents = RawElement(xml, "Contents", pos, &pos)) {
    std::optional<S3ListedObject> o = ParseContents(*contents);
    if (!o) return std::nullopt;
    page.objects.push_back(std::move(*o));
  }
  page.truncated = XmlElement(xml, "IsTruncated").value_or("false") == "true";
  if (page.truncated) {
    std::optional<std::string> token = XmlElement(xml, "NextContinuationToken");
    if (!token || token->empty()) return std::nullopt;
    page.next_token = *token;
  }
  return page;
}

std::optional<S3UploadsPage> ParseUploadsPage(const std::string& xml) {
  if (xml.find("<ListMultipartUploadsResult") == std::string::npos) return std::nullopt;
  S3UploadsPage page;
  size_t pos = 0;
  while (std::optional<std::string> upload = RawElement(xml, "Upload", pos, &pos)) {
    std::optional<std::string> key = XmlElement(*upload, "Key");
    std::optional<std::string> id = XmlElement(*upload, "UploadId");
    if (!key || !id || id->empty()) return std::nullopt;
    page.uploads.push_back(S3Upload{std::move(*key), std::move(*id)});
  }
  page.truncated = XmlElement(xml, "IsTruncated").value_or("false") == "true";
  if (page.truncated) {
    std::optional<std::string> key = XmlElement(xml, "NextKeyMarker");
    std::optional<std::string> id = XmlElement(xml, "NextUploadIdMarker");
    if (!key || !id || (key->empty() && id->empty())) return std::nullopt;
    page.next_key_marker = *key;
    page.next_upload_id_marker = *id;
  }
  return page;
}

}  // namespace wanbackup::pipeline::internal
