// The S3 client's composite operations, built from Run: listing page by page and uploads
// (one PUT, or a multipart upload with its parts in flight). No libcurl here.
#include <algorithm>
#include <chrono>
#include <mutex>

#include "common/cancel.h"
#include "common/failpoint.h"
#include "store/internal/s3_client.h"

namespace wanbackup::pipeline::internal {

Result<std::vector<S3ListedObject>> S3Client::List(const std::string& prefix) {
  std::vector<S3ListedObject> all;
  std::string token;
  do {
    S3Request r;
    r.method = S3Request::Method::kGet;
    // SigV4 wants the query canonical: keys sorted, values escaped (libcurl 7.88 signs it as
    // it is written).
    if (!token.empty()) r.query = "continuation-token=" + S3Escape(token, false) + "&";
    r.query += "list-type=2&prefix=" + S3Escape(prefix, false);
    WB_RETURN_IF_ERROR(RunOne(&r, "listing " + Describe(prefix)));
    std::optional<S3ListPage> page = ParseListPage(r.response);
    if (!page) {
      return Status::IoError("listing " + Describe(prefix) +
                             ": the answer is no ListObjectsV2 result");
    }
    for (S3ListedObject& o : page->objects)
      all.push_back(std::move(o));
    token = page->truncated ? page->next_token : "";
  } while (!token.empty());
  return all;
}

Result<std::vector<S3Upload>> S3Client::ListUploads(const std::string& prefix) {
  std::vector<S3Upload> all;
  std::string key_marker, id_marker;
  bool more = true;
  while (more) {
    S3Request r;
    r.method = S3Request::Method::kGet;
    if (!key_marker.empty()) r.query = "key-marker=" + S3Escape(key_marker, false) + "&";
    r.query += "prefix=" + S3Escape(prefix, false);
    if (!id_marker.empty()) r.query += "&upload-id-marker=" + S3Escape(id_marker, false);
    r.query += "&uploads=";
    WB_RETURN_IF_ERROR(RunOne(&r, "listing the unfinished uploads under " + Describe(prefix)));
    std::optional<S3UploadsPage> page = ParseUploadsPage(r.response);
    if (!page) {
      return Status::IoError("listing the unfinished uploads under " + Describe(prefix) +
                             ": the answer is no ListMultipartUploads result");
    }
    for (S3Upload& u : page->uploads)
      all.push_back(std::move(u));
    more = page->truncated;
    key_marker = page->next_key_marker;
    id_marker = page->next_upload_id_marker;
  }
  return all;
}

Status S3Client::AbortUpload(const S3Upload& upload) {
  S3Request r;
  r.method = S3Request::Method::kDelete;
  r.key = upload.key;
  r.query = "uploadId=" + S3Escape(upload.upload_id, false);
  Status s = RunOne(&r, "aborting an unfinished upload of " + Describe(upload.key));
  if (s.code() == StatusCode::kNotFound) return Status::Ok();  // NoSuchUpload: gone already
  return s;
}

Status S3Client::Upload(const std::string& key, const uint8_t* data, size_t size) {
  if (size > options_part_size()) return UploadMultipart(key, data, size);
  S3Request r;
  r.method = S3Request::Method::kPut;
  r.key = key;
  r.body = data;
  r.body_size = size;
  return RunOne(&r, "uploading " + Describe(key));
}

// One multipart upload's turn to send its parts (S3Client::parallel_uploads_ at once).
class UploadTurn {
 public:
  explicit UploadTurn(S3Client& client) : client_(client) {}
  ~UploadTurn() {
    if (!held_) return;
    std::lock_guard<std::mutex> lock(client_.uploads_mu_);
    --client_.uploads_running_;
    client_.uploads_cv_.notify_one();
  }
  UploadTurn(const UploadTurn&) = delete;
  UploadTurn& operator=(const UploadTurn&) = delete;

  // Waits for the turn; Cancelled when the run is interrupted meanwhile.
  Status Wait(const std::string& what) {
    std::unique_lock<std::mutex> lock(client_.uploads_mu_);
    while (client_.parallel_uploads_ > 0 && client_.uploads_running_ >= client_.parallel_uploads_) {
      if (CancellationRequested()) return Status::Cancelled(what + ": interrupted");
      client_.uploads_cv_.wait_for(lock, std::chrono::milliseconds(200));
    }
    ++client_.uploads_running_;
    client_.most_uploads_ = std::max(client_.most_uploads_.load(), client_.uploads_running_);
    held_ = true;
    return Status::Ok();
  }

 private:
  S3Client& client_;
  bool held_ = false;
};

Status S3Client::UploadMultipart(const std::string& key, const uint8_t* data, size_t size) {
  const std::string what = "uploading " + Describe(key);
  S3Request start;
  start.method = S3Request::Method::kPost;
  start.key = key;
  start.query = "uploads=";
  WB_RETURN_IF_ERROR(RunOne(&start, what));
  const std::optional<std::string> upload_id = XmlElement(start.response, "UploadId");
  if (!upload_id || upload_id->empty()) {
    return Status::IoError(what + ": the service gave no upload id");
  }
  const std::string id = S3Escape(*upload_id, false);
  const size_t part = options_part_size();
  std::vector<S3Request> parts((size + part - 1) / part);
  std::vector<S3Request*> pointers;
  for (size_t i = 0; i < parts.size(); ++i) {
    S3Request& p = parts[i];
    p.method = S3Request::Method::kPut;
    p.key = key;
    p.query = "partNumber=" + std::to_string(i + 1) + "&uploadId=" + id;
    p.body = data + i * part;
    p.body_size = std::min(part, size - i * part);
    pointers.push_back(&p);
  }
  Status status;
  {
    UploadTurn turn(*this);
    status = turn.Wait(what);
    if (status.ok()) status = Run(pointers, what);
  }
  WB_FAILPOINT("s3.before-upload-complete");  // the parts are stored, the object is not
  std::string complete;
  if (status.ok()) {
    complete = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < parts.size(); ++i) {
      complete += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
                  parts[i].etag + "</ETag></Part>";
    }
    complete += "</CompleteMultipartUpload>";
    S3Request done;
    done.method = S3Request::Method::kPost;
    done.key = key;
    done.query = "uploadId=" + id;
    done.body = reinterpret_cast<const uint8_t*>(complete.data());
    done.body_size = complete.size();
    status = RunOne(&done, what);
    // S3 may answer 200 and still fail the completion, in the body.
    if (status.ok() && done.response.find("<Error>") != std::string::npos) {
      status = Status::IoError(what + ": completing the upload failed: " +
                               XmlElement(done.response, "Code").value_or("no code"));
    }
  }
  if (!status.ok()) {
    S3Request abort;
    abort.method = S3Request::Method::kDelete;
    abort.key = key;
    abort.query = "uploadId=" + id;
    (void)RunOne(&abort, what);  // best effort: the upload's parts are the service's to drop
  }
  return status;
}

}  // namespace wanbackup::pipeline::internal
