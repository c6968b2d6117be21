// Secret: a passphrase or CHAP secret held in locked memory, wiped when freed, never printed.
//
// Secrets reach wanbackup from a file (mode checked), an environment variable or a TTY prompt;
// they never travel on a child process's command line and never enter logs (ToString()
// prints "<redacted>"). The bytes live in libsodium's guarded allocations (sodium_malloc):
// mlock'd so they are not swapped out, marked MADV_DONTDUMP so core dumps leave them out, fenced
// by guard pages, and zeroed by sodium_free when the Secret is destroyed or grows. The readers
// below put what they read straight into that memory, not into an ordinary std::string first.
// docs/threat-model.md says what this does and does not protect.
//
// Move-only; not thread-safe (treat like std::string). Allocation failure throws std::bad_alloc,
// as std::string would.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/result.h"

namespace wanbackup {

class Secret {
 public:
  Secret() = default;
  // Copies `value` into locked memory. The caller's copy is its own to wipe.
  explicit Secret(std::string_view value);
  Secret(const Secret&) = delete;
  Secret& operator=(const Secret&) = delete;
  Secret(Secret&& other) noexcept;
  Secret& operator=(Secret&& other) noexcept;
  ~Secret();

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // The plain text, for handing to the library that needs it; valid until the Secret changes
  // or dies. Do not log it, and do not copy it into ordinary memory.
  std::string_view reveal() const { return {data_ != nullptr ? data_ : "", size_}; }
  // The same, NUL-terminated, for C APIs.
  const char* c_str() const { return data_ != nullptr ? data_ : ""; }
  // Writable bytes (size() of them), for filling a secret in place.
  char* data() { return data_; }
  // Grows (new bytes are zero) or shrinks (dropped bytes are wiped) to `size` bytes. Growing
  // moves the bytes to a larger locked block and wipes the old one.
  void Resize(size_t size);
  Secret Clone() const { return Secret(reveal()); }
  // Where the bytes live (null before the first byte); for tests that check the memory.
  const void* storage() const { return data_; }

  static constexpr std::string_view kRedacted = "<redacted>";

 private:
  void Reserve(size_t capacity);
  void Free();

  char* data_ = nullptr;  // sodium_malloc(capacity_ + 1); NUL after the last byte
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// Reads a secret from the first line of `path` (trailing CR/LF removed). Fails on an empty or
// unreadable file, and on one CheckTrustedFile refuses (common/file_trust.h: others can read it,
// or it or a directory above it is not yours or root's, or others can write there), as the job
// config refuses it: one rule for every credential file. A FIFO or a device (`<(pass show x)`)
// is read until its first line: Timeout when nothing comes from it for 60 s, Cancelled at
// SIGINT or SIGTERM (common/cancel.h), so that a silent writer never holds a command.
Result<Secret> ReadSecretFile(const std::string& path);

// Reads one line from `fd` (a terminal), byte by byte, into locked memory; the newline is not
// part of it. Stops at end of input.
Result<Secret> ReadSecretLine(int fd);

// Reads a secret from environment variable `name`; an unset or empty variable gives an empty
// Secret (not an error: the caller decides whether one is required). The variable itself stays
// in the process environment (see docs/threat-model.md).
Secret SecretFromEnv(const char* name);

}  // namespace wanbackup
