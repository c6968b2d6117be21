// The few XML documents of the S3 API that the client reads: a ListObjectsV2 page, an error
// body, the upload id of a new multipart upload, a page of unfinished multipart uploads. A scanner
// for these flat documents (elements found by name, the five predefined entities decoded), not a
// general XML parser. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace wanbackup::pipeline::internal {

struct S3ListedObject {
  std::string key;
  uint64_t size = 0;
  int64_t mtime_ns = 0;  // LastModified
};

struct S3ListPage {
  std::vector<S3ListedObject> objects;
  bool truncated = false;
  std::string next_token;  // NextContinuationToken when truncated
};

// A multipart upload begun and neither completed nor aborted (ListMultipartUploads).
struct S3Upload {
  std::string key;
  std::string upload_id;
};

struct S3UploadsPage {
  std::vector<S3Upload> uploads;
  bool truncated = false;
  std::string next_key_marker, next_upload_id_marker;  // when truncated
};

// Parses one page of ListMultipartUploads; nullopt when the document is not one (or an
// <Upload> lacks its key or id, or a truncated page its markers).
std::optional<S3UploadsPage> ParseUploadsPage(const std::string& xml);

// Parses one page of ListObjectsV2; nullopt when the document is not one (or a <Contents>
// lacks its key, size or time).
std::optional<S3ListPage> ParseListPage(const std::string& xml);

// The text of the first <tag>…</tag> in `xml`, entities decoded; nullopt when there is none.
std::optional<std::string> XmlElement(const std::string& xml, const std::string& tag);

// Decodes &amp; &lt; &gt; &quot; &apos; and numeric character references below 128.
std::string XmlUnescape(const std::string& text);

// "2026-11-28T05:51:56.380Z" as nanoseconds since the epoch; nullopt when malformed.
std::optional<int64_t> ParseIso8601(const std::string& text);

}  // namespace wanbackup::pipeline::internal
