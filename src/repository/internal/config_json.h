// config.json's text: writing it, and its authentication code (docs/format.md, "config.json").
// Parsing is public (ParseRepositoryConfig, repository.h). Pure functions; thread-safe.
#pragma once

#include <memory>
#include <string>

#include "repository/keys.h"
#include "repository/repository.h"

namespace wanbackup::pipeline::internal {

// The file's canonical text (format, id, chunking, compression, encryption, and the
// authentication code when it has one).
std::string ConfigJson(const RepositoryConfig& c);
// The authentication code of config.json: keyed over its canonical text without the code.
std::string Authenticate(RepositoryConfig c, const KeySet& keys);
// Whether config.json's `authentication` (hex) is the code of its settings.
bool Authentic(const RepositoryConfig& c, const KeySet& keys);

// What Init checks of its options (chunk size, compression level).
Status CheckNewRepositoryOptions(const InitOptions& o);
// A new repository's config: a random id, a new master key wrapped for the credentials (a key
// file that does not exist is written first), and the authentication code.
Result<RepositoryConfig> NewRepositoryConfig(const InitOptions& o);

// The S3 store of the repository at `url` (credentials from the environment).
// With `fingerprint`, says which credentials the objects use (for KeepS3ObjectsForOpen).
Result<std::shared_ptr<S3Objects>> OpenS3Objects(const std::string& url,
                                                 std::string* fingerprint = nullptr);
// Hands `objects` (opened for `url` with the credentials `fingerprint` names) to the next
// OpenS3Objects of the same URL and credentials in this process, which takes them instead of
// making new ones; any other OpenS3Objects drops them (repository_s3.cpp).
void KeepS3ObjectsForOpen(const std::string& url, const std::string& fingerprint,
                          std::shared_ptr<S3Objects> objects);
// config.json of an S3 repository; NotFound naming a missing bucket or a missing repository.
Result<RepositoryConfig> ReadS3Config(S3Objects& s3);

}  // namespace wanbackup::pipeline::internal
