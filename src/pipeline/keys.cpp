#include "pipeline/keys.h"

#include <cstring>

#include <sodium.h>

namespace wanbackup::pipeline {
namespace {

constexpr char kKdfContext[crypto_kdf_CONTEXTBYTES + 1] = "wanbkup1";
constexpr uint64_t kDigestKeyId = 1;
constexpr uint64_t kDataKeyId = 2;
constexpr uint64_t kConfigKeyId = 3;

}  // namespace

Status InitCrypto() {
  if (sodium_init() < 0) return Status::Internal("libsodium failed to initialize");
  return Status::Ok();
}

KeySet::KeySet(const Key& master) : encrypted_(true) {
  crypto_kdf_derive_from_key(digest_key_.data(), digest_key_.size(), kDigestKeyId, kKdfContext,
                             master.data());
  crypto_kdf_derive_from_key(data_key_.data(), data_key_.size(), kDataKeyId, kKdfContext,
                             master.data());
  crypto_kdf_derive_from_key(config_key_.data(), config_key_.size(), kConfigKeyId, kKdfContext,
                             master.data());
}

KeySet KeySet::Unencrypted(const std::string& repository_id) {
  KeySet k;
  const std::string label = "wanbackup unencrypted repository " + repository_id;
  crypto_generichash(k.digest_key_.data(), k.digest_key_.size(),
                     reinterpret_cast<const unsigned char*>(label.data()), label.size(), nullptr,
                     0);
  // Public, like the digest key: it catches accidents, not an attacker (threat-model.md).
  const std::string config_label = "wanbackup unencrypted config " + repository_id;
  crypto_generichash(k.config_key_.data(), k.config_key_.size(),
                     reinterpret_cast<const unsigned char*>(config_label.data()),
                     config_label.size(), nullptr, 0);
  return k;
}

KeySet::~KeySet() {
  sodium_memzero(digest_key_.data(), digest_key_.size());
  sodium_memzero(data_key_.data(), data_key_.size());
  sodium_memzero(config_key_.data(), config_key_.size());
}

Digest KeySet::ConfigMac(const std::string& text) const {
  Digest d;
  crypto_generichash(d.data(), d.size(), reinterpret_cast<const unsigned char*>(text.data()),
                     text.size(), config_key_.data(), config_key_.size());
  return d;
}

Digest KeySet::DigestOf(const uint8_t* data, size_t size) const {
  Digest d;
  crypto_generichash(d.data(), d.size(), data, size, digest_key_.data(), digest_key_.size());
  return d;
}

Status CheckKdfParams(const KdfParams& p) {
  if (p.opslimit < crypto_pwhash_OPSLIMIT_MIN || p.opslimit > kMaxKdfOps) {
    return Status::InvalidArgument(
        "Argon2id passes must be from " + std::to_string(crypto_pwhash_OPSLIMIT_MIN) + " to " +
        std::to_string(kMaxKdfOps) + ", not " + std::to_string(p.opslimit));
  }
  if (p.memlimit < crypto_pwhash_MEMLIMIT_MIN || p.memlimit > kMaxKdfMemory) {
    return Status::InvalidArgument("Argon2id memory must be from " +
                                   std::to_string(crypto_pwhash_MEMLIMIT_MIN) + " bytes to " +
                                   std::to_string(kMaxKdfMemory >> 30) + " GiB, not " +
                                   std::to_string(p.memlimit) + " bytes");
  }
  return Status::Ok();
}

Key RandomKey() {
  Key k;
  randombytes_buf(k.data(), k.size());
  return k;
}

KdfParams NewKdfParams() {
  KdfParams p;
  randombytes_buf(p.salt.data(), p.salt.size());
  return p;
}

Result<Key> KeyFromPassphrase(const Secret& passphrase, const KdfParams& params) {
  if (passphrase.empty()) return Status::InvalidArgument("the passphrase is empty");
  Key kek;
  if (crypto_pwhash(kek.data(), kek.size(), passphrase.reveal().data(), passphrase.reveal().size(),
                    params.salt.data(), params.opslimit, params.memlimit,
                    crypto_pwhash_ALG_ARGON2ID13) != 0) {
    return Status::Internal("Argon2id needs " + std::to_string(params.memlimit >> 20) +
                            " MiB of memory, which the system refused");
  }
  return kek;
}

Result<Key> KeyFromKeyFile(const Secret& contents) {
  Key kek;
  std::string hex = contents.reveal();
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r' || hex.back() == ' '))
    hex.pop_back();
  if (hex.size() != 64 || !FromHex(hex, kek.data(), kek.size())) {
    return Status::InvalidArgument(
        "the key file must hold 64 hexadecimal digits (made by "
        "'wanbackup init --key-file')");
  }
  return kek;
}

Secret NewKeyFileContents() {
  Key k = RandomKey();
  Secret s(ToHex(k.data(), k.size()) + "\n");
  sodium_memzero(k.data(), k.size());
  return s;
}

std::string WrapKey(const Key& master, const Key& kek, const std::string& repository_id) {
  unsigned char nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
  randombytes_buf(nonce, sizeof nonce);
  unsigned char sealed[32 + crypto_aead_xchacha20poly1305_ietf_ABYTES];
  unsigned long long sealed_len = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(
      sealed, &sealed_len, master.data(), master.size(),
      reinterpret_cast<const unsigned char*>(repository_id.data()), repository_id.size(), nullptr,
      nonce, kek.data());
  return ToHex(nonce, sizeof nonce) + ToHex(sealed, static_cast<size_t>(sealed_len));
}

Result<Key> UnwrapKey(const std::string& wrapped_hex, const Key& kek,
                      const std::string& repository_id) {
  constexpr size_t kNonce = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
  constexpr size_t kSealed = 32 + crypto_aead_xchacha20poly1305_ietf_ABYTES;
  unsigned char raw[kNonce + kSealed];
  if (wrapped_hex.size() != 2 * sizeof raw || !FromHex(wrapped_hex, raw, sizeof raw)) {
    return Status::Corruption("the repository's wrapped key is malformed");
  }
  Key master;
  unsigned long long len = 0;
  if (crypto_aead_xchacha20poly1305_ietf_decrypt(
          master.data(), &len, nullptr, raw + kNonce, kSealed,
          reinterpret_cast<const unsigned char*>(repository_id.data()), repository_id.size(), raw,
          kek.data()) != 0 ||
      len != master.size()) {
    return Status::AuthFailed("wrong passphrase or key file for this repository");
  }
  return master;
}

std::string ToHex(const uint8_t* data, size_t size) {
  std::string out(size * 2 + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), data, size);
  out.resize(size * 2);
  return out;
}

bool FromHex(const std::string& hex, uint8_t* out, size_t size) {
  size_t bin_len = 0;
  return sodium_hex2bin(out, size, hex.data(), hex.size(), nullptr, &bin_len, nullptr) == 0 &&
         bin_len == size;
}

}  // namespace wanbackup::pipeline
