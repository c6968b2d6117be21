// The objects of a repository on S3-compatible storage beside its packs: config.json and the
// lock objects under locks/ (docs/format.md, "A repository on S3"), and the pack store over the
// same client and connections. Names are relative to the location's prefix. Credentials come
// from the caller and appear in no message. Thread-safe (the client serialises what must be).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "store/pack_store.h"
#include "store/s3_pack_store.h"
#include "store/s3_url.h"

namespace wanbackup::pipeline {

namespace internal {
class S3Client;
}

struct S3Object {
  std::string name;  // relative to the prefix
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

class S3Objects {
 public:
  // Checks nothing over the network (CheckBucket does).
  static Result<std::shared_ptr<S3Objects>> Open(const S3Location& location,
                                                 S3Credentials credentials,
                                                 const S3Options& options = {});
  ~S3Objects();
  S3Objects(const S3Objects&) = delete;
  S3Objects& operator=(const S3Objects&) = delete;

  // One request to the bucket: OK when it exists and the keys work; NotFound ("bucket B does not
  // exist at ENDPOINT"), AuthFailed (wrong keys) or Unavailable (no answer) as one line.
  Status CheckBucket();
  // The whole object; NotFound when there is none.
  Result<std::string> Get(const std::string& name);
  // Writes the whole object (replacing one that is there).
  Status Put(const std::string& name, const std::string& data);
  // Writes the object only if none is there ("If-None-Match: *"); AlreadyExists otherwise.
  Status Create(const std::string& name, const std::string& data);
  // Removes it; one already gone is not an error.
  Status Remove(const std::string& name);
  // Every object whose name starts with `dir` (e.g. "locks/").
  Result<std::vector<S3Object>> List(const std::string& dir);
  // The packs, over the same client (packs/ab/<name>.pack).
  std::unique_ptr<PackStore> Packs() const;

  const S3Location& location() const { return location_; }
  // "s3:http://host:port/bucket/PREFIX/name", for messages.
  std::string Describe(const std::string& name) const;

 private:
  S3Objects(S3Location location, std::shared_ptr<internal::S3Client> client);
  S3Location location_;
  std::shared_ptr<internal::S3Client> client_;
};

}  // namespace wanbackup::pipeline
