#include "store/s3_objects.h"

#include "store/internal/s3_client.h"

namespace wanbackup::pipeline {

using internal::S3Client;
using internal::S3Request;

S3Objects::S3Objects(S3Location location, std::shared_ptr<S3Client> client)
    : location_(std::move(location)), client_(std::move(client)) {}

S3Objects::~S3Objects() = default;

Result<std::shared_ptr<S3Objects>> S3Objects::Open(const S3Location& location,
                                                   S3Credentials credentials,
                                                   const S3Options& options) {
  WB_ASSIGN_OR_RETURN(std::unique_ptr<S3Client> client,
                      S3Client::Create(location, std::move(credentials), options));
  return std::shared_ptr<S3Objects>(
      new S3Objects(location, std::shared_ptr<S3Client>(std::move(client))));
}

Status S3Objects::CheckBucket() {
  S3Request r;
  r.method = S3Request::Method::kHead;
  const std::string bucket = "s3:" + location_.Endpoint() + "/" + location_.bucket;
  Status s = client_->RunOne(&r, "opening bucket " + bucket);
  if (s.code() == StatusCode::kNotFound) {
    return Status::NotFound("bucket '" + location_.bucket + "' does not exist at " +
                            location_.Endpoint() + " (create it first; wanbackup never does)");
  }
  return s;
}

Result<std::string> S3Objects::Get(const std::string& name) {
  S3Request r;
  r.key = location_.Key(name);
  WB_RETURN_IF_ERROR(client_->RunOne(&r, "reading " + Describe(name)));
  return std::move(r.response);
}

Status S3Objects::Put(const std::string& name, const std::string& data) {
  return client_->Upload(location_.Key(name), reinterpret_cast<const uint8_t*>(data.data()),
                         data.size());
}

Status S3Objects::Create(const std::string& name, const std::string& data) {
  S3Request r;
  r.method = S3Request::Method::kPut;
  r.key = location_.Key(name);
  r.body = reinterpret_cast<const uint8_t*>(data.data());
  r.body_size = data.size();
  r.create_only = true;
  Status s = client_->RunOne(&r, "creating " + Describe(name));
  if (r.outcome.http_status == 412 || r.outcome.error_code == "PreconditionFailed") {
    return Status::AlreadyExists(Describe(name) + " already exists");
  }
  return s;
}

Status S3Objects::Remove(const std::string& name) {
  S3Request r;
  r.method = S3Request::Method::kDelete;
  r.key = location_.Key(name);
  Status s = client_->RunOne(&r, "removing " + Describe(name));
  if (s.code() == StatusCode::kNotFound) return Status::Ok();
  return s;
}

Result<std::vector<S3Object>> S3Objects::List(const std::string& dir) {
  const std::string base = location_.Key("");
  WB_ASSIGN_OR_RETURN(std::vector<internal::S3ListedObject> listed,
                      client_->List(location_.Key(dir)));
  std::vector<S3Object> out;
  for (internal::S3ListedObject& o : listed) {
    if (o.key.compare(0, base.size(), base) != 0) continue;
    out.push_back(S3Object{o.key.substr(base.size()), o.size, o.mtime_ns});
  }
  return out;
}

std::unique_ptr<PackStore> S3Objects::Packs() const {
  return internal::NewS3PackStoreOver(client_);
}

std::string S3Objects::Describe(const std::string& name) const {
  return client_->Describe(location_.Key(name));
}

}  // namespace wanbackup::pipeline
