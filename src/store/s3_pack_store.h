// A repository's packs on S3-compatible object storage (Ceph RGW, MinIO, AWS): each pack is one
// object `PREFIX/packs/ab/abcdef….pack`, path-style, signed with SigV4 by libcurl. The writer
// keeps the pack in memory and uploads it whole at every Sync (the same name and a longer copy
// of the same bytes, so a retried or repeated upload is idempotent; once the pack is sealed it
// is never written again); large packs go up as multipart uploads with parts in flight. So a
// pack synced k times costs k uploads of what it holds by then: a snapshot into an S3
// repository closes its packs at 64 MiB and uploads each once, in the background
// (SyncInBackground) while it fills the next ones, and commits the catalog only once every pack
// it names is up; nothing goes up before a pack's first Sync. Readers fetch ranged GETs: no
// request to open a pack, no HEAD per record (ReadRecordAt reads without asking the size).
// Credentials come from the environment (or the caller), never from argv, and appear in no message.
// Thread-safe: Open, List, Remove and readers from any thread (S3Options::parallel_calls of them at
// once, each on its own reused connections); a PackWriter belongs to one thread (its background
// upload runs on another, joined by its next Sync or its destructor).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/result.h"
#include "common/secret.h"
#include "store/pack_store.h"
#include "store/s3_url.h"

namespace wanbackup::pipeline {

struct S3Credentials {
  std::string access_key_id;
  Secret secret_access_key;
  std::string region = "us-east-1";
};

// Names the credentials file (S3CredentialsFromFile) that S3CredentialsFromEnvironment reads
// before the AWS_* variables: a path, never the keys (the CLI's --s3-credentials-file and a job
// config's s3_credentials_file set it for the process).
inline constexpr const char kS3CredentialsFileEnv[] = "WANBACKUP_S3_CREDENTIALS_FILE";

// The file $WANBACKUP_S3_CREDENTIALS_FILE names when it is set; else AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_DEFAULT_REGION (default us-east-1). AuthFailed naming the
// missing variable.
Result<S3Credentials> S3CredentialsFromEnvironment();

// An AWS shared-credentials file: `aws_access_key_id`, `aws_secret_access_key` and optionally
// `region` (or `aws_default_region`), `key = value`, in its [default] profile or before any
// profile; `#` and `;` start comments. Read as a secret file is (common/file_trust.h: root's or
// yours, no access for group or others, in directories only root or you can change):
// PermissionDenied otherwise. InvalidArgument naming the file and line for anything it cannot
// use; the secret never appears in a message.
Result<S3Credentials> S3CredentialsFromFile(const std::string& path);

struct S3Options {
  std::string ca_file;           // TLS: this CA bundle instead of the system's store
  int max_in_flight = 16;        // transfers at once in one call (multipart parts)
  int parallel_calls = 64;       // threads whose requests run at once (readers, the uploads
                                 // of packs synced in the background), each on its own multi
                                 // handle and connections: a restore's check of every chunk's
                                 // record header runs 64 ranged GETs at once
  size_t part_size = 16u << 20;  // multipart above this size, in parts of this size
  // Multipart uploads sending their parts at once (the others wait, begun, for one to end);
  // 0: no limit. Each part is a connection that Ceph RGW drains at a few MB/s, so a snapshot
  // needs many parts in flight, but uploads that all start together also end together and
  // leave the line idle in between: 6 uploads of 4 parts each, with the snapshot's other 2
  // packs ready behind them (kObjectUploadPacks), go on the moment one ends. At 64 ms one-way,
  // 1 Gbit/s, 1 GiB, 3 runs each: 6 at once 72.4-73.9 MB/s, 4 at once 64.2-73.9, all 8 packs
  // at once 64.2-71.4 (docs/performance.md §9).
  int parallel_uploads = 6;
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::seconds stall_timeout{30};  // a transfer that moves no byte this long fails
  int max_attempts = 6;                    // per request, the first included
  std::chrono::milliseconds first_backoff{200};
};

// A store over the bucket and prefix of `location`. Checks nothing over the network: the first
// request says whether the service, the bucket and the credentials are right.
Result<std::unique_ptr<PackStore>> NewS3PackStore(const S3Location& location,
                                                  S3Credentials credentials,
                                                  const S3Options& options);

}  // namespace wanbackup::pipeline
