// Keys: a repository's master key, the keys derived from it, and how the master key is kept
// (wrapped by a key-encryption key from a passphrase via Argon2id, or from a key file), so a
// passphrase can change without touching data. Threat model: docs/threat-model.md.
// KeySet is immutable after creation and safe to share between threads.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "common/result.h"
#include "common/secret.h"

namespace wanbackup::pipeline {

using Key = std::array<uint8_t, 32>;
using Digest = std::array<uint8_t, 32>;

// Argon2id cost, stored with the repository so it can be raised later.
struct KdfParams {
  uint64_t opslimit = 3;
  uint64_t memlimit = 128ull << 20;
  std::array<uint8_t, 16> salt{};
};

class KeySet {
 public:
  // Derives the digest and data keys from a master key.
  explicit KeySet(const Key& master);
  // For an unencrypted repository: digests keyed by the (public) repository id, no data key.
  static KeySet Unencrypted(const std::string& repository_id);
  ~KeySet();
  KeySet(const KeySet&) = default;
  KeySet& operator=(const KeySet&) = default;

  bool encrypted() const { return encrypted_; }
  // Keyed BLAKE2b-256: reveals nothing about the data without the key.
  Digest DigestOf(const uint8_t* data, size_t size) const;
  const Key& data_key() const { return data_key_; }
  // Keyed BLAKE2b-256 of config.json's canonical text under its own subkey (format.md, "Keys"):
  // who lacks the master key cannot make a config.json that passes.
  Digest ConfigMac(const std::string& text) const;

 private:
  KeySet() = default;
  bool encrypted_ = false;
  Key digest_key_{};
  Key data_key_{};
  Key config_key_{};
};

// Initializes libsodium; call before anything else here (idempotent, thread-safe).
Status InitCrypto();

// Argon2id cost wanbackup accepts, when set and when read from config.json: from libsodium's
// minimums (the tests use them) to what a backup host can still afford without being asked to
// swap: 64 passes and 16 GiB. A config.json outside is refused as damaged, before the KDF runs.
inline constexpr uint64_t kMaxKdfOps = 64;
inline constexpr uint64_t kMaxKdfMemory = uint64_t{16} << 30;
Status CheckKdfParams(const KdfParams& params);

Key RandomKey();
KdfParams NewKdfParams();
// The key-encryption key from a passphrase. Costs about half a second and `memlimit` bytes.
Result<Key> KeyFromPassphrase(const Secret& passphrase, const KdfParams& params);
// The key-encryption key from a key file's contents (its first line, 64 hex digits).
Result<Key> KeyFromKeyFile(const Secret& contents);
// A new key file's contents: 32 random bytes as 64 hex digits.
Secret NewKeyFileContents();

// Master key sealed with XChaCha20-Poly1305 under `kek`, bound to the repository id; hex.
std::string WrapKey(const Key& master, const Key& kek, const std::string& repository_id);
// Fails with AuthFailed when `kek` is wrong (wrong passphrase or key file).
Result<Key> UnwrapKey(const std::string& wrapped_hex, const Key& kek,
                      const std::string& repository_id);

std::string ToHex(const uint8_t* data, size_t size);
bool FromHex(const std::string& hex, uint8_t* out, size_t size);

}  // namespace wanbackup::pipeline
