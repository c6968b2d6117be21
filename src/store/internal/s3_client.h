// The S3 client over libcurl: path-style requests signed with libcurl's own SigV4
// (CURLOPT_AWS_SIGV4), run through one curl multi handle so that many transfers are in flight
// over reused connections, each retried with backoff as s3_retry.h decides. libcurl's types
// stay in s3_client.cpp. Thread-safe: requests from several threads are serialised (one multi
// handle; each Run may carry many transfers at once).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/result.h"
#include "store/internal/s3_retry.h"
#include "store/internal/s3_xml.h"
#include "store/s3_pack_store.h"
#include "store/s3_url.h"

namespace wanbackup::pipeline::internal {

// One request. The caller owns every buffer it points to until Run returns.
struct S3Request {
  enum class Method { kGet, kPut, kPost, kDelete, kHead };
  Method method = Method::kGet;
  std::string key;    // object key, unescaped ("" for the bucket itself)
  std::string query;  // "a=1&b=2": keys sorted, values escaped (S3QueryEscape)
  // PUT/POST body (Content-MD5 and x-amz-content-sha256 are computed from it).
  const uint8_t* body = nullptr;
  size_t body_size = 0;
  bool create_only = false;  // PUT: "If-None-Match: *", so an existing object is never replaced
  // Ranged GET into a buffer: bytes [range_offset, range_offset + range_size) go to range_out.
  uint8_t* range_out = nullptr;
  uint64_t range_offset = 0;
  size_t range_size = 0;
  // Set by Run:
  S3Outcome outcome;
  std::string response;  // the body (when no range_out), at most 16 MiB kept
  size_t received = 0;   // bytes written to range_out
  std::string etag;      // the ETag header, quotes kept
  uint64_t content_length = 0;
};

// RFC 3986 unreserved characters kept, everything else %XX (SigV4's encoding); '/' kept when
// `keep_slash` (object keys), escaped otherwise (query values).
std::string S3Escape(const std::string& text, bool keep_slash);

class S3Client {
 public:
  static Result<std::unique_ptr<S3Client>> Create(const S3Location& location,
                                                  S3Credentials credentials,
                                                  const S3Options& options);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  // Runs every request, at most max_in_flight at once, each retried while S3ShouldRetry says
  // so. Returns OK when all succeeded, else the first failure as one line ("<what>: …"), after
  // the others have finished. Each request's outcome is left in it.
  Status Run(const std::vector<S3Request*>& requests, const std::string& what);

  // One request; OK on success.
  Status RunOne(S3Request* request, const std::string& what);

  // Every object under `prefix`, page by page (ListObjectsV2).
  Result<std::vector<S3ListedObject>> List(const std::string& prefix);

  // The multipart uploads begun under `prefix` and neither completed nor aborted, page by page.
  Result<std::vector<S3Upload>> ListUploads(const std::string& prefix);
  // Aborts a multipart upload: the service drops its parts. One already gone is not an error.
  Status AbortUpload(const S3Upload& upload);

  // Uploads `data` as object `key`: one PUT, or a multipart upload with parts in flight when it
  // is larger than the part size.
  Status Upload(const std::string& key, const uint8_t* data, size_t size);

  // How many attempts were sent again since the client was made (all threads).
  uint64_t retries() const { return retries_.load(); }
  // The most multipart uploads that sent their parts at once since the client was made.
  int most_uploads_at_once() const { return most_uploads_.load(); }

  const S3Location& location() const { return location_; }
  // "s3:http://host:port/bucket/KEY", for messages.
  std::string Describe(const std::string& key) const;

 private:
  struct Impl;
  struct Slot;  // one multi handle and the mutex that guards it
  S3Client(const S3Location& location, size_t part_size);
  Status UploadMultipart(const std::string& key, const uint8_t* data, size_t size);
  size_t options_part_size() const { return part_size_; }

  S3Location location_;
  size_t part_size_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<size_t> next_slot_{0};
  std::atomic<uint64_t> retries_{0};
  // Multipart uploads whose parts are in flight at once (S3Options::parallel_uploads): the
  // others wait, their upload begun, and go the moment one ends (s3_client_ops.cpp).
  int parallel_uploads_ = 0;
  std::mutex uploads_mu_;
  std::condition_variable uploads_cv_;
  int uploads_running_ = 0;  // GUARDED_BY(uploads_mu_)
  std::atomic<int> most_uploads_{0};
  friend class UploadTurn;
};

// The pack store over `client` (s3_pack_store.cpp), for a store that shares its client.
std::unique_ptr<PackStore> NewS3PackStoreOver(std::shared_ptr<S3Client> client);

}  // namespace wanbackup::pipeline::internal
