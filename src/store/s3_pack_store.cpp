#include "store/s3_pack_store.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "common/file_trust.h"
#include "common/text.h"
#include "store/internal/s3_client.h"

namespace wanbackup::pipeline {
namespace {

using internal::S3Client;
using internal::S3Request;

// Keeps the pack in memory; every Sync uploads all of it as the one object (the same bytes
// with more after them, so the object only ever grows by what was appended, and a retried
// upload is the same upload). Nothing is uploaded before the first Sync: the object appears
// then, whole (a round trip per new pack saved; a run killed before leaves no object at all).
// SyncInBackground runs that upload on a thread of its own, which the next Sync (or the
// destructor) joins: a snapshot keeps several full packs going up at once while it fills the
// next one.
class S3PackWriter final : public PackWriter {
 public:
  S3PackWriter(std::shared_ptr<S3Client> client, std::string key, std::string where)
      : client_(std::move(client)), key_(std::move(key)), where_(std::move(where)) {}
  ~S3PackWriter() override {
    if (upload_.joinable()) upload_.join();
  }

  Status Start(const std::string& repository_id) {
    uint8_t header[kPackHeaderSize];
    WB_RETURN_IF_ERROR(MakePackHeader(repository_id, header));
    bytes_.assign(header, header + sizeof header);
    return Status::Ok();
  }

  Result<uint64_t> Append(const uint8_t* data, size_t size) override {
    if (upload_.joinable()) return Status::Internal(where_ + ": appended to while uploading");
    const uint64_t offset = bytes_.size();
    bytes_.insert(bytes_.end(), data, data + size);
    return offset;
  }

  Status Sync() override {
    if (upload_.joinable()) {
      upload_.join();
      if (!background_.ok()) return background_;
      uploaded_ = background_size_;
    }
    if (uploaded_ == bytes_.size()) return Status::Ok();
    WB_RETURN_IF_ERROR(client_->Upload(key_, bytes_.data(), bytes_.size()));
    uploaded_ = bytes_.size();
    return Status::Ok();
  }

  Status SyncInBackground() override {
    if (upload_.joinable() || uploaded_ == bytes_.size()) return Status::Ok();
    background_size_ = bytes_.size();
    finished_ = false;
    upload_ = std::thread([this] {
      background_ = client_->Upload(key_, bytes_.data(), background_size_);
      finished_ = true;
    });
    return Status::Ok();
  }

  bool SyncFinished() const override { return finished_; }

  uint64_t size() const override { return bytes_.size(); }
  const std::string& path() const override { return where_; }

 private:
  std::shared_ptr<S3Client> client_;
  std::string key_;
  std::string where_;
  std::vector<uint8_t> bytes_;
  size_t uploaded_ = 0;
  std::thread upload_;                // the background upload, when one was started and not joined
  size_t background_size_ = 0;        // what it uploads
  Status background_;                 // how it went, once joined
  std::atomic<bool> finished_{true};  // the background upload has returned (or none was begun)
};

// Ranged GETs of one object. Like a local file, the object may grow while a reader is open (a
// writer's next Sync uploads a longer copy of the same bytes), so nothing is refused for lying
// past the size seen when it was opened: the GET says where the object ends, and Size() asks
// again (one HEAD; a caller that knows the size, as the catalog does, should not need it).
class S3PackReader final : public PackReader {
 public:
  S3PackReader(std::shared_ptr<S3Client> client, std::string key, std::string where)
      : client_(std::move(client)), key_(std::move(key)), where_(std::move(where)) {}

  Status ReadAt(uint64_t offset, uint8_t* data, size_t size) const override {
    if (size == 0) return Status::Ok();
    S3Request r;
    r.key = key_;
    r.range_out = data;
    r.range_offset = offset;
    r.range_size = size;
    Status s = client_->RunOne(&r, "reading " + where_);
    if (s.code() == StatusCode::kNotFound)
      return Status::Corruption("pack " + where_ + " is missing");
    if (r.outcome.error_code == "InvalidRange" || (s.ok() && r.received != size)) {
      return Status::Corruption("pack " + where_ + " ends before byte " +
                                std::to_string(offset + size));
    }
    return s;
  }

  Result<uint64_t> Size() const override {
    S3Request head;
    head.method = S3Request::Method::kHead;
    head.key = key_;
    Status s = client_->RunOne(&head, "reading the size of " + where_);
    if (s.code() == StatusCode::kNotFound)
      return Status::Corruption("pack " + where_ + " is missing");
    WB_RETURN_IF_ERROR(s);
    return head.content_length;
  }

 private:
  std::shared_ptr<S3Client> client_;
  std::string key_;
  std::string where_;
};

class S3PackStore final : public PackStore {
 public:
  explicit S3PackStore(std::shared_ptr<S3Client> client) : client_(std::move(client)) {}

  Result<std::unique_ptr<PackWriter>> Create(const std::string& name,
                                             const std::string& repository_id) override {
    auto w = std::make_unique<S3PackWriter>(client_, Key(name), Describe(name));
    WB_RETURN_IF_ERROR(w->Start(repository_id));
    return std::unique_ptr<PackWriter>(std::move(w));
  }

  // No request: the first read says whether the pack is there (Corruption "is missing"
  // otherwise, as ReadAt reports it), which saves a round trip per pack opened.
  Result<std::unique_ptr<PackReader>> Open(const std::string& name) override {
    return std::unique_ptr<PackReader>(
        std::make_unique<S3PackReader>(client_, Key(name), Describe(name)));
  }

  Result<std::vector<StoredPack>> List() override {
    const std::string dir = client_->location().Key("packs/");
    WB_ASSIGN_OR_RETURN(std::vector<internal::S3ListedObject> objects, client_->List(dir));
    std::vector<StoredPack> packs;
    for (const internal::S3ListedObject& o : objects) {
      // packs/ab/<name>.pack, and nothing else (a stray object is no pack of ours)
      const std::string rest = o.key.substr(dir.size());
      StoredPack p;
      if (rest.size() < 3 || rest[2] != '/' || !IsPackFileName(rest.substr(3), &p.name) ||
          p.name.compare(0, 2, rest, 0, 2) != 0) {
        continue;
      }
      p.size = o.size;
      p.mtime_ns = o.mtime_ns;
      packs.push_back(std::move(p));
    }
    std::sort(packs.begin(), packs.end(), [](const StoredPack& a, const StoredPack& b) {
      return std::tie(a.mtime_ns, a.name) < std::tie(b.mtime_ns, b.name);
    });
    return packs;
  }

  Status Remove(const std::string& name) override {
    S3Request r;
    r.method = S3Request::Method::kDelete;
    r.key = Key(name);
    Status s = client_->RunOne(&r, "removing " + Describe(name));
    if (s.code() == StatusCode::kNotFound) return Status::Ok();
    return s;
  }

  Result<size_t> AbandonUnfinished() override {
    WB_ASSIGN_OR_RETURN(std::vector<internal::S3Upload> uploads,
                        client_->ListUploads(client_->location().Key("packs/")));
    for (const internal::S3Upload& u : uploads)
      WB_RETURN_IF_ERROR(client_->AbortUpload(u));
    return uploads.size();
  }

  std::string Describe(const std::string& name) const override {
    return client_->Describe(Key(name));
  }

 private:
  std::string Key(const std::string& name) const {
    return client_->location().Key("packs/" + name.substr(0, 2) + "/" + name + ".pack");
  }

  std::shared_ptr<S3Client> client_;
};

}  // namespace

namespace internal {
std::unique_ptr<PackStore> NewS3PackStoreOver(std::shared_ptr<S3Client> client) {
  return std::make_unique<S3PackStore>(std::move(client));
}
}  // namespace internal

namespace {

std::string Trimmed(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return std::string();
  const size_t end = s.find_last_not_of(" \t\r");
  return std::string(s.substr(begin, end - begin + 1));
}

}  // namespace

Result<S3Credentials> S3CredentialsFromFile(const std::string& path) {
  Result<std::string> read = ReadTrustedFile(path, TrustedFile::kSecret);
  if (!read.ok()) return read.status().WithContext("S3 credentials file");
  std::string text = std::move(*read);
  S3Credentials c;
  bool have_id = false, have_secret = false, in_default = true;
  std::string error;
  size_t line_no = 0;
  for (size_t at = 0; at < text.size() && error.empty();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view raw(text.data() + at, end - at);
    at = end + 1;
    ++line_no;
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    const std::string line = Trimmed(raw.substr(0, raw.find_first_of("#;")));
    if (line.empty()) continue;
    if (line.front() == '[') {
      if (line.back() != ']') {
        error = where + "a profile header without its ']'";
      } else {
        in_default = Trimmed(std::string_view(line).substr(1, line.size() - 2)) == "default";
      }
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) {
      error = where + "not 'key = value'";
      continue;
    }
    if (!in_default) continue;
    const std::string key = Trimmed(std::string_view(line).substr(0, eq));
    const std::string value = Trimmed(std::string_view(line).substr(eq + 1));
    if (key == "aws_access_key_id") {
      c.access_key_id = value;
      have_id = !value.empty();
    } else if (key == "aws_secret_access_key") {
      c.secret_access_key = Secret(value);
      have_secret = !value.empty();
    } else if (key == "region" || key == "aws_default_region") {
      if (!value.empty()) c.region = value;
    } else if (key != "aws_session_token") {
      error = where + "unknown key '" + EscapeForTerminal(key) +
              "' (aws_access_key_id, aws_secret_access_key, region)";
    } else {
      error = where + "aws_session_token: temporary credentials are not supported";
    }
  }
  ::explicit_bzero(text.data(), text.size());  // the secret, before the buffer is freed
  if (!error.empty()) return Status::InvalidArgument("S3 credentials file " + error);
  if (!have_id || !have_secret) {
    return Status::InvalidArgument("S3 credentials file " + path + ": no " +
                                   (have_id ? "aws_secret_access_key" : "aws_access_key_id") +
                                   " in its [default] profile");
  }
  return c;
}

Result<S3Credentials> S3CredentialsFromEnvironment() {
  if (const char* file = std::getenv(kS3CredentialsFileEnv); file != nullptr && *file != '\0') {
    return S3CredentialsFromFile(file);
  }
  S3Credentials c;
  const char* id = std::getenv("AWS_ACCESS_KEY_ID");
  const char* secret = std::getenv("AWS_SECRET_ACCESS_KEY");
  const char* region = std::getenv("AWS_DEFAULT_REGION");
  if (id == nullptr || *id == '\0') {
    return Status::AuthFailed("no S3 credentials: AWS_ACCESS_KEY_ID is not set");
  }
  if (secret == nullptr || *secret == '\0') {
    return Status::AuthFailed("no S3 credentials: AWS_SECRET_ACCESS_KEY is not set");
  }
  c.access_key_id = id;
  c.secret_access_key = Secret(secret);
  if (region != nullptr && *region != '\0') c.region = region;
  return c;
}

Result<std::unique_ptr<PackStore>> NewS3PackStore(const S3Location& location,
                                                  S3Credentials credentials,
                                                  const S3Options& options) {
  WB_ASSIGN_OR_RETURN(std::unique_ptr<S3Client> client,
                      S3Client::Create(location, std::move(credentials), options));
  return std::unique_ptr<PackStore>(
      std::make_unique<S3PackStore>(std::shared_ptr<S3Client>(std::move(client))));
}

}  // namespace wanbackup::pipeline
