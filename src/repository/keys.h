// Keys: a repository's master key, the keys derived from it, and how the master key is kept
// (wrapped by a key-encryption key from a passphrase via Argon2id, or from a key file), so a
// passphrase can change without touching data. Threat model: docs/threat-model.md.
//
// Every secret key lives in a SecureKey: libsodium guarded memory (mlock'd, left out of core
// dumps, guard pages, read-only once set, zeroed when freed). KeySet is immutable after creation
// and safe to share between threads; copying one shares its keys, it does not copy their bytes.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "common/hex.h"
#include "common/result.h"
#include "common/secret.h"

namespace wanbackup::pipeline {

using Digest = std::array<uint8_t, 32>;

// For unordered containers of digests: a keyed hash's bytes are already uniform.
struct DigestHash {
  size_t operator()(const Digest& d) const {
    size_t h;
    std::memcpy(&h, d.data(), sizeof h);
    return h;
  }
};

// 32 secret bytes in sodium_malloc memory. Writable through mutable_data() until Seal(), then
// read-only (a stray write faults instead of changing the key). Move-only; a moved-from key
// holds nothing. Not thread-safe to fill; a sealed key may be read from any thread.
// Allocation failure throws std::bad_alloc, as operator new would.
class SecureKey {
 public:
  static constexpr size_t kSize = 32;

  SecureKey();  // 32 zero bytes, writable
  SecureKey(SecureKey&& other) noexcept;
  SecureKey& operator=(SecureKey&& other) noexcept;
  SecureKey(const SecureKey&) = delete;
  SecureKey& operator=(const SecureKey&) = delete;
  ~SecureKey();

  static constexpr size_t size() { return kSize; }
  const uint8_t* data() const { return data_; }
  // REQUIRES: not sealed.
  uint8_t* mutable_data() { return data_; }
  // Makes the bytes read-only from now on.
  void Seal();
  bool sealed() const { return sealed_; }
  // A sealed copy in its own locked block.
  SecureKey Clone() const;
  // Constant-time comparison.
  bool operator==(const SecureKey& other) const;

 private:
  void Free();
  uint8_t* data_ = nullptr;
  bool sealed_ = false;
};

// Argon2id cost, stored with the repository so it can be raised later.
struct KdfParams {
  uint64_t opslimit = 3;
  uint64_t memlimit = 128ull << 20;
  std::array<uint8_t, 16> salt{};
};

// The range a KDF cost must lie in. The lower bounds are libsodium's own minimums (tests use
// tiny costs for speed; what new repositories get is KdfParams' defaults). The upper bounds are
// ours: Argon2id must hold `memlimit` bytes at once on every machine that opens the repository
// (the recovery host too), so 16 GiB — 128 times the default — is already more than a restore
// box should be asked for; and passes only multiply the time of every unlock (64 passes over
// 128 MiB take about 10 s), where more memory is the better defence against GPUs. A config.json
// asking for more is damaged or hostile: honouring it could exhaust memory or hang for hours.
inline constexpr uint64_t kMinKdfOps = 1;
inline constexpr uint64_t kMaxKdfOps = 64;
inline constexpr uint64_t kMinKdfMemory = 8 << 10;
inline constexpr uint64_t kMaxKdfMemory = 16ull << 30;

// OK when `params` lies in the range above; otherwise InvalidArgument, with a message such as
// "KDF memory 1.00 TiB is out of range (8.00 KiB to 16.00 GiB)". ParseConfig turns a failure
// into Corruption, prefixed with the file's path.
Status CheckKdfParams(const KdfParams& params);
// `next` may replace `current` only when it costs at least as much in both memory and passes
// (and passes CheckKdfParams): lowering the cost would make a stolen config.json cheaper to
// attack. InvalidArgument naming the value that is too low otherwise.
Status CheckKdfRaise(const KdfParams& current, const KdfParams& next);

class KeySet {
 public:
  // Derives the digest and data keys from a master key.
  explicit KeySet(const SecureKey& master);
  // For an unencrypted repository: digests keyed by the (public) repository id, no data key.
  static KeySet Unencrypted(const std::string& repository_id);

  bool encrypted() const { return encrypted_; }
  // Keyed BLAKE2b-256: reveals nothing about the data without the key.
  Digest DigestOf(const uint8_t* data, size_t size) const;
  const SecureKey& data_key() const { return keys_->data; }
  // Keyed BLAKE2b-256 of config.json's canonical text under its own subkey (format.md, "Keys"):
  // who lacks the master key cannot make a config.json that passes.
  Digest ConfigMac(const std::string& text) const;

 private:
  struct Keys {
    SecureKey digest;
    SecureKey data;
    SecureKey config;
  };
  KeySet() = default;
  bool encrypted_ = false;
  std::shared_ptr<const Keys> keys_;  // shared by copies; the bytes exist once
};

// Initializes libsodium; call before anything else here (idempotent, thread-safe).
Status InitCrypto();

SecureKey RandomKey();
KdfParams NewKdfParams();
// The key-encryption key from a passphrase. Costs about half a second and `memlimit` bytes.
// Refuses parameters outside CheckKdfParams' range.
Result<SecureKey> KeyFromPassphrase(const Secret& passphrase, const KdfParams& params);
// The key-encryption key from a key file's contents (its first line, 64 hex digits).
Result<SecureKey> KeyFromKeyFile(const Secret& contents);
// A new key file's contents: 32 random bytes as 64 hex digits.
Secret NewKeyFileContents();

// Master key sealed with XChaCha20-Poly1305 under `kek`, bound to the repository id; hex.
std::string WrapKey(const SecureKey& master, const SecureKey& kek,
                    const std::string& repository_id);
// Fails with AuthFailed when `kek` is wrong (wrong passphrase or key file).
Result<SecureKey> UnwrapKey(const std::string& wrapped_hex, const SecureKey& kek,
                            const std::string& repository_id);

}  // namespace wanbackup::pipeline
