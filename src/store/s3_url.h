// Where an S3 repository lives: the URL form `s3:http://HOST[:PORT]/BUCKET[/PREFIX]` or
// `s3:https://…` (the form restic users know), addressed path-style. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace wanbackup::pipeline {

struct S3Location {
  bool https = false;
  std::string host;    // a name, an IPv4 address, or an IPv6 address without brackets
  uint16_t port = 0;   // 80 or 443 when the URL names none
  std::string bucket;  // 3..63 characters: lower-case letters, digits, '.', '-'
  std::string prefix;  // "" or path segments without a leading or trailing '/'

  // "http://host:port" (IPv6 in brackets): what requests are sent to.
  std::string Endpoint() const;
  // The key of `name` inside the prefix: "PREFIX/name", or "name" without a prefix.
  std::string Key(const std::string& name) const;
  // "s3:http://host:port/bucket/prefix", for messages.
  std::string ToString() const;
};

// True when `url` starts with "s3:" (what decides between a directory and S3).
bool IsS3Url(const std::string& url);

// Parses the URL; InvalidArgument with one line saying what is wrong. Credentials in the URL
// ("user:secret@host") are refused: they come from the environment or a credentials file.
Result<S3Location> ParseS3Url(const std::string& url);

}  // namespace wanbackup::pipeline
