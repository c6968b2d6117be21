// Secret: a passphrase or CHAP secret held in memory, wiped when destroyed, never printed.
//
// Secrets reach wanbackup from a file (mode checked), an environment variable or a TTY prompt;
// they never travel on a child process's command line and never enter logs (ToString()
// prints "<redacted>"). Move-only; not thread-safe (treat like std::string).
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace wanbackup {

class Secret {
 public:
  Secret() = default;
  explicit Secret(std::string value) : value_(std::move(value)) {}
  Secret(const Secret&) = delete;
  Secret& operator=(const Secret&) = delete;
  Secret(Secret&& other) noexcept;
  Secret& operator=(Secret&& other) noexcept;
  ~Secret();

  bool empty() const { return value_.empty(); }
  // The plain text, for handing to the library that needs it. Do not log it.
  const std::string& reveal() const { return value_; }
  Secret Clone() const { return Secret(value_); }
  static constexpr std::string_view kRedacted = "<redacted>";

 private:
  void Wipe();
  std::string value_;
};

// Reads a secret from the first line of `path` (trailing CR/LF removed). Fails on an empty or
// unreadable file. When the file is readable by group or others, *warning is set to a message
// the caller should print (like ssh, we say so; unlike ssh, we still go on).
Result<Secret> ReadSecretFile(const std::string& path, std::string* warning);

// Reads a secret from environment variable `name`; an unset or empty variable gives an empty
// Secret (not an error: the caller decides whether one is required).
Secret SecretFromEnv(const char* name);

}  // namespace wanbackup
