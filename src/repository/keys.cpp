#include "repository/keys.h"

#include <cstring>
#include <new>

#include <sodium.h>

#include "common/units.h"
#include "repository/primitives.h"

namespace wanbackup::pipeline {
namespace {

constexpr char kKdfContext[crypto_kdf_CONTEXTBYTES + 1] = "wanbkup1";
constexpr uint64_t kDigestKeyId = 1;
constexpr uint64_t kDataKeyId = 2;
constexpr uint64_t kConfigKeyId = 3;

static_assert(SecureKey::kSize == primitives::kKeySize);
static_assert(std::tuple_size_v<Digest> == primitives::kDigestSize);
static_assert(kMinKdfOps >= crypto_pwhash_argon2id_OPSLIMIT_MIN);
static_assert(kMaxKdfOps <= crypto_pwhash_argon2id_OPSLIMIT_MAX);
static_assert(kMinKdfMemory >= crypto_pwhash_argon2id_MEMLIMIT_MIN);
static_assert(kMaxKdfMemory <= crypto_pwhash_argon2id_MEMLIMIT_MAX);

}  // namespace

SecureKey::SecureKey() {
  if (sodium_init() < 0) throw std::bad_alloc();  // sodium_malloc needs it; idempotent
  data_ = static_cast<uint8_t*>(sodium_malloc(kSize));
  if (data_ == nullptr) throw std::bad_alloc();
  sodium_memzero(data_, kSize);
}

SecureKey::SecureKey(SecureKey&& other) noexcept : data_(other.data_), sealed_(other.sealed_) {
  other.data_ = nullptr;
  other.sealed_ = false;
}

SecureKey& SecureKey::operator=(SecureKey&& other) noexcept {
  if (this != &other) {
    Free();
    data_ = other.data_;
    sealed_ = other.sealed_;
    other.data_ = nullptr;
    other.sealed_ = false;
  }
  return *this;
}

SecureKey::~SecureKey() {
  Free();
}

void SecureKey::Free() {
  // sodium_free makes the block writable again, zeroes and unlocks it, then unmaps it.
  if (data_ != nullptr) sodium_free(data_);
  data_ = nullptr;
  sealed_ = false;
}

void SecureKey::Seal() {
  if (data_ != nullptr && !sealed_) sodium_mprotect_readonly(data_);
  sealed_ = true;
}

SecureKey SecureKey::Clone() const {
  SecureKey copy;
  if (data_ != nullptr) std::memcpy(copy.data_, data_, kSize);
  copy.Seal();
  return copy;
}

bool SecureKey::operator==(const SecureKey& other) const {
  if (data_ == nullptr || other.data_ == nullptr) return data_ == other.data_;
  return sodium_memcmp(data_, other.data_, kSize) == 0;
}

Status CheckKdfParams(const KdfParams& params) {
  if (params.memlimit < kMinKdfMemory || params.memlimit > kMaxKdfMemory) {
    return Status::InvalidArgument("KDF memory " + FormatBytes(params.memlimit) +
                                   " is out of range (" + FormatBytes(kMinKdfMemory) + " to " +
                                   FormatBytes(kMaxKdfMemory) + ")");
  }
  if (params.opslimit < kMinKdfOps || params.opslimit > kMaxKdfOps) {
    return Status::InvalidArgument("KDF passes (opslimit) " + std::to_string(params.opslimit) +
                                   " is out of range (" + std::to_string(kMinKdfOps) + " to " +
                                   std::to_string(kMaxKdfOps) + ")");
  }
  return Status::Ok();
}

Status CheckKdfRaise(const KdfParams& current, const KdfParams& next) {
  constexpr const char* kWhy =
      ": the cost can only be raised (a lower one would make a copy of config.json cheaper to "
      "attack)";
  if (next.memlimit < current.memlimit) {
    return Status::InvalidArgument("KDF memory " + FormatBytes(next.memlimit) +
                                   " is below the repository's " + FormatBytes(current.memlimit) +
                                   kWhy);
  }
  if (next.opslimit < current.opslimit) {
    return Status::InvalidArgument("KDF passes " + std::to_string(next.opslimit) +
                                   " is below the repository's " +
                                   std::to_string(current.opslimit) + kWhy);
  }
  return CheckKdfParams(next);
}

Status InitCrypto() {
  if (sodium_init() < 0) return Status::Internal("libsodium failed to initialize");
  return primitives::CheckImplementationChoice();
}

KeySet::KeySet(const SecureKey& master) : encrypted_(true) {
  auto keys = std::make_shared<Keys>();
  crypto_kdf_derive_from_key(keys->digest.mutable_data(), SecureKey::size(), kDigestKeyId,
                             kKdfContext, master.data());
  crypto_kdf_derive_from_key(keys->data.mutable_data(), SecureKey::size(), kDataKeyId, kKdfContext,
                             master.data());
  crypto_kdf_derive_from_key(keys->config.mutable_data(), SecureKey::size(), kConfigKeyId,
                             kKdfContext, master.data());
  keys->digest.Seal();
  keys->data.Seal();
  keys->config.Seal();
  keys_ = std::move(keys);
}

KeySet KeySet::Unencrypted(const std::string& repository_id) {
  KeySet k;
  auto keys = std::make_shared<Keys>();
  const std::string label = "wanbackup unencrypted repository " + repository_id;
  crypto_generichash(keys->digest.mutable_data(), SecureKey::size(),
                     reinterpret_cast<const unsigned char*>(label.data()), label.size(), nullptr,
                     0);
  // Public, like the digest key: it catches accidents, not an attacker (threat-model.md).
  const std::string config_label = "wanbackup unencrypted config " + repository_id;
  crypto_generichash(keys->config.mutable_data(), SecureKey::size(),
                     reinterpret_cast<const unsigned char*>(config_label.data()),
                     config_label.size(), nullptr, 0);
  keys->digest.Seal();
  keys->data.Seal();  // all zero; never used without encryption
  keys->config.Seal();
  k.keys_ = std::move(keys);
  return k;
}

Digest KeySet::ConfigMac(const std::string& text) const {
  Digest d;
  primitives::KeyedDigest(keys_->config.data(), reinterpret_cast<const uint8_t*>(text.data()),
                          text.size(), d.data());
  return d;
}

Digest KeySet::DigestOf(const uint8_t* data, size_t size) const {
  Digest d;
  primitives::KeyedDigest(keys_->digest.data(), data, size, d.data());
  return d;
}

SecureKey RandomKey() {
  SecureKey k;
  randombytes_buf(k.mutable_data(), k.size());
  k.Seal();
  return k;
}

KdfParams NewKdfParams() {
  KdfParams p;
  randombytes_buf(p.salt.data(), p.salt.size());
  return p;
}

Result<SecureKey> KeyFromPassphrase(const Secret& passphrase, const KdfParams& params) {
  if (passphrase.empty()) return Status::InvalidArgument("the passphrase is empty");
  WB_RETURN_IF_ERROR(CheckKdfParams(params));
  SecureKey kek;
  if (crypto_pwhash(kek.mutable_data(), kek.size(), passphrase.reveal().data(),
                    passphrase.reveal().size(), params.salt.data(), params.opslimit,
                    params.memlimit, crypto_pwhash_ALG_ARGON2ID13) != 0) {
    return Status::Internal("Argon2id needs " + FormatBytes(params.memlimit) +
                            " of memory, which the system refused");
  }
  kek.Seal();
  return kek;
}

Result<SecureKey> KeyFromKeyFile(const Secret& contents) {
  std::string_view hex = contents.reveal();  // no copy: trimmed in place, decoded from there
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r' || hex.back() == ' '))
    hex.remove_suffix(1);
  SecureKey kek;
  if (hex.size() != 2 * kek.size() || !FromHex(hex, kek.mutable_data(), kek.size())) {
    return Status::InvalidArgument(
        "the key file must hold 64 hexadecimal digits (made by "
        "'wanbackup init --key-file')");
  }
  kek.Seal();
  return kek;
}

Secret NewKeyFileContents() {
  const SecureKey k = RandomKey();
  Secret s;
  s.Resize(2 * k.size() + 1);  // 64 hex digits and a newline, where bin2hex puts its NUL
  sodium_bin2hex(s.data(), s.size(), k.data(), k.size());
  s.data()[2 * k.size()] = '\n';
  return s;
}

std::string WrapKey(const SecureKey& master, const SecureKey& kek,
                    const std::string& repository_id) {
  unsigned char nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
  randombytes_buf(nonce, sizeof nonce);
  unsigned char sealed[SecureKey::kSize + crypto_aead_xchacha20poly1305_ietf_ABYTES];
  unsigned long long sealed_len = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(
      sealed, &sealed_len, master.data(), master.size(),
      reinterpret_cast<const unsigned char*>(repository_id.data()), repository_id.size(), nullptr,
      nonce, kek.data());
  return ToHex(nonce, sizeof nonce) + ToHex(sealed, static_cast<size_t>(sealed_len));
}

Result<SecureKey> UnwrapKey(const std::string& wrapped_hex, const SecureKey& kek,
                            const std::string& repository_id) {
  constexpr size_t kNonce = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
  constexpr size_t kSealed = SecureKey::kSize + crypto_aead_xchacha20poly1305_ietf_ABYTES;
  unsigned char raw[kNonce + kSealed];
  if (wrapped_hex.size() != 2 * sizeof raw || !FromHex(wrapped_hex, raw, sizeof raw)) {
    return Status::Corruption("the repository's wrapped key is malformed");
  }
  SecureKey master;
  unsigned long long len = 0;
  if (crypto_aead_xchacha20poly1305_ietf_decrypt(
          master.mutable_data(), &len, nullptr, raw + kNonce, kSealed,
          reinterpret_cast<const unsigned char*>(repository_id.data()), repository_id.size(), raw,
          kek.data()) != 0 ||
      len != master.size()) {
    return Status::AuthFailed("wrong passphrase or key file for this repository");
  }
  master.Seal();
  return master;
}

}  // namespace wanbackup::pipeline
