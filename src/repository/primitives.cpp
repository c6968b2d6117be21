#include "repository/primitives.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include <sodium.h>

namespace wanbackup::pipeline::primitives {
namespace {

static_assert(kKeySize == crypto_aead_xchacha20poly1305_ietf_KEYBYTES);
static_assert(kNonceSize == crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
static_assert(kTagSize == crypto_aead_xchacha20poly1305_ietf_ABYTES);
static_assert(kDigestSize <= crypto_generichash_BYTES_MAX);

// OpenSSL's update functions take an int length: feed larger buffers in pieces.
constexpr size_t kMaxPiece = size_t{1} << 30;

// The methods, fetched once and kept for the life of the process (never freed: OpenSSL's own
// exit handler may already have run when static destructors do).
struct OpenSslMethods {
  EVP_MAC* mac = nullptr;
  EVP_CIPHER* cipher = nullptr;
};

struct FreeMacCtx {
  void operator()(EVP_MAC_CTX* c) const { EVP_MAC_CTX_free(c); }  // wipes the key copy
};
struct FreeCipherCtx {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }  // wipes the subkey
};
using MacCtx = std::unique_ptr<EVP_MAC_CTX, FreeMacCtx>;
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, FreeCipherCtx>;

// False after any failure; OpenSSL's error queue is cleared so it does not grow per thread.
bool Done(bool ok) {
  if (!ok) ERR_clear_error();
  return ok;
}

bool DigestWith(const OpenSslMethods& m, const uint8_t* key, const uint8_t* data, size_t size,
                uint8_t* out) {
  MacCtx c(EVP_MAC_CTX_new(m.mac));
  if (!c) return Done(false);
  size_t digest_size = kDigestSize;
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &digest_size),
                               OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(c.get(), key, kKeySize, params) != 1) return Done(false);
  if (size > 0 && EVP_MAC_update(c.get(), data, size) != 1) return Done(false);
  size_t written = 0;
  return Done(EVP_MAC_final(c.get(), out, &written, kDigestSize) == 1 && written == kDigestSize);
}

// A cipher context keyed for one record: HChaCha20 subkey and the 12-byte IETF nonce.
CipherCtx XChaChaContext(const OpenSslMethods& m, const uint8_t* key, const uint8_t* nonce,
                         bool encrypt) {
  std::array<uint8_t, 32> subkey;
  crypto_core_hchacha20(subkey.data(), nonce, key, nullptr);
  std::array<uint8_t, 12> iv{};
  std::memcpy(iv.data() + 4, nonce + 16, 8);
  CipherCtx c(EVP_CIPHER_CTX_new());
  const bool ok =
      c &&
      (encrypt ? EVP_EncryptInit_ex2(c.get(), m.cipher, subkey.data(), iv.data(), nullptr)
               : EVP_DecryptInit_ex2(c.get(), m.cipher, subkey.data(), iv.data(), nullptr)) == 1;
  sodium_memzero(subkey.data(), subkey.size());
  if (!ok) c.reset();
  return c;
}

// Runs the associated data, then `in` into `out`, through an initialised context.
bool CipherUpdate(EVP_CIPHER_CTX* c, const uint8_t* ad, size_t ad_size, const uint8_t* in,
                  size_t size, uint8_t* out) {
  int n = 0;
  for (size_t done = 0; done < ad_size; done += kMaxPiece) {
    const int piece = static_cast<int>(std::min(kMaxPiece, ad_size - done));
    if (EVP_CipherUpdate(c, nullptr, &n, ad + done, piece) != 1) return false;
  }
  for (size_t done = 0; done < size; done += kMaxPiece) {
    const int piece = static_cast<int>(std::min(kMaxPiece, size - done));
    if (EVP_CipherUpdate(c, out + done, &n, in + done, piece) != 1 || n != piece) return false;
  }
  return true;
}

bool SealWith(const OpenSslMethods& m, const uint8_t* key, const uint8_t* nonce, const uint8_t* ad,
              size_t ad_size, const uint8_t* plain, size_t size, uint8_t* out) {
  CipherCtx c = XChaChaContext(m, key, nonce, /*encrypt=*/true);
  int n = 0;
  return Done(c && CipherUpdate(c.get(), ad, ad_size, plain, size, out) &&
              EVP_EncryptFinal_ex(c.get(), out + size, &n) == 1 && n == 0 &&
              EVP_CIPHER_CTX_ctrl(c.get(), EVP_CTRL_AEAD_GET_TAG, static_cast<int>(kTagSize),
                                  out + size) == 1);
}

// False when anything failed, a wrong tag included: the caller asks libsodium to tell which.
bool OpenWith(const OpenSslMethods& m, const uint8_t* key, const uint8_t* nonce, const uint8_t* ad,
              size_t ad_size, const uint8_t* sealed, size_t sealed_size, uint8_t* out) {
  const size_t size = sealed_size - kTagSize;
  CipherCtx c = XChaChaContext(m, key, nonce, /*encrypt=*/false);
  uint8_t tag[kTagSize];
  std::memcpy(tag, sealed + size, kTagSize);
  int n = 0;
  return Done(
      c &&
      EVP_CIPHER_CTX_ctrl(c.get(), EVP_CTRL_AEAD_SET_TAG, static_cast<int>(kTagSize), tag) == 1 &&
      CipherUpdate(c.get(), ad, ad_size, sealed, size, out) &&
      EVP_DecryptFinal_ex(c.get(), out + size, &n) == 1 && n == 0);
}

void SodiumDigest(const uint8_t* key, const uint8_t* data, size_t size, uint8_t* out) {
  crypto_generichash(out, kDigestSize, data, size, key, kKeySize);
}

void SodiumSeal(const uint8_t* key, const uint8_t* nonce, const uint8_t* ad, size_t ad_size,
                const uint8_t* plain, size_t size, uint8_t* out) {
  unsigned long long written = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(out, &written, plain, size, ad, ad_size, nullptr,
                                             nonce, key);
}

bool SodiumOpen(const uint8_t* key, const uint8_t* nonce, const uint8_t* ad, size_t ad_size,
                const uint8_t* sealed, size_t sealed_size, uint8_t* out) {
  unsigned long long written = 0;
  return crypto_aead_xchacha20poly1305_ietf_decrypt(out, &written, nullptr, sealed, sealed_size, ad,
                                                    ad_size, nonce, key) == 0;
}

// True when OpenSSL gives libsodium's bytes on a fixed input: a digest, a seal, and an open of
// that seal (and a refusal once one bit of it is flipped).
bool AgreesWithLibsodium(const OpenSslMethods& m) {
  std::array<uint8_t, kKeySize> key;
  std::array<uint8_t, kNonceSize> nonce;
  std::array<uint8_t, 1000> data;
  for (size_t i = 0; i < key.size(); ++i)
    key[i] = static_cast<uint8_t>(i);
  for (size_t i = 0; i < nonce.size(); ++i)
    nonce[i] = static_cast<uint8_t>(0xa0 + i);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>(i * 7 + 3);
  const uint8_t ad[] = "wanbackup self-test";
  std::array<uint8_t, kDigestSize> d1, d2;
  SodiumDigest(key.data(), data.data(), data.size(), d1.data());
  if (!DigestWith(m, key.data(), data.data(), data.size(), d2.data()) || d1 != d2) return false;
  std::array<uint8_t, 1000 + kTagSize> s1, s2;
  SodiumSeal(key.data(), nonce.data(), ad, sizeof ad, data.data(), data.size(), s1.data());
  if (!SealWith(m, key.data(), nonce.data(), ad, sizeof ad, data.data(), data.size(), s2.data()) ||
      s1 != s2) {
    return false;
  }
  std::array<uint8_t, 1000> plain;
  if (!OpenWith(m, key.data(), nonce.data(), ad, sizeof ad, s1.data(), s1.size(), plain.data()) ||
      plain != data) {
    return false;
  }
  s1[10] ^= 1;
  return !OpenWith(m, key.data(), nonce.data(), ad, sizeof ad, s1.data(), s1.size(), plain.data());
}

// The methods when OpenSSL has both and agrees with libsodium; nullptr otherwise.
const OpenSslMethods* WorkingOpenSsl() {
  static const OpenSslMethods* const methods = []() -> const OpenSslMethods* {
    if (sodium_init() < 0) return nullptr;
    auto* m = new OpenSslMethods;  // kept for the process: see OpenSslMethods
    m->mac = EVP_MAC_fetch(nullptr, "BLAKE2BMAC", nullptr);
    m->cipher = EVP_CIPHER_fetch(nullptr, "ChaCha20-Poly1305", nullptr);
    if (m->mac == nullptr || m->cipher == nullptr || !AgreesWithLibsodium(*m)) {
      ERR_clear_error();
      EVP_MAC_free(m->mac);
      EVP_CIPHER_free(m->cipher);
      delete m;
      return nullptr;
    }
    return m;
  }();
  return methods;
}

std::string_view EnvChoice() {
  const char* v = std::getenv(kImplementationEnv);
  return v == nullptr ? std::string_view() : std::string_view(v);
}

}  // namespace

Status CheckImplementationChoice() {
  const std::string_view choice = EnvChoice();
  if (choice.empty() || choice == "libsodium") return Status::Ok();
  if (choice != "openssl") {
    return Status::InvalidArgument(std::string(kImplementationEnv) + "=" + std::string(choice) +
                                   " is not an implementation (libsodium or openssl)");
  }
  if (WorkingOpenSsl() == nullptr) {
    return Status::Unsupported(std::string(kImplementationEnv) + "=openssl, but this libcrypto (" +
                               Describe(Implementation::kOpenSsl) +
                               ") lacks BLAKE2BMAC or ChaCha20-Poly1305, or disagrees with "
                               "libsodium; unset it to use libsodium");
  }
  return Status::Ok();
}

Implementation Active() {
  static const Implementation chosen = [] {
    const std::string_view choice = EnvChoice();
    const bool wants_openssl = choice.empty() || choice == "openssl";
    return wants_openssl && WorkingOpenSsl() != nullptr ? Implementation::kOpenSsl
                                                        : Implementation::kLibsodium;
  }();
  return chosen;
}

std::string Describe(Implementation impl) {
  if (impl == Implementation::kOpenSsl) {
    return std::string("OpenSSL ") + OpenSSL_version(OPENSSL_VERSION_STRING);
  }
  return std::string("libsodium ") + sodium_version_string();
}

void KeyedDigest(const uint8_t* key, const uint8_t* data, size_t size, uint8_t* out,
                 Implementation impl) {
  if (impl == Implementation::kOpenSsl && internal::OpenSslKeyedDigest(key, data, size, out)) {
    return;
  }
  SodiumDigest(key, data, size, out);
}

void Seal(const uint8_t* key, const uint8_t* nonce, const uint8_t* ad, size_t ad_size,
          const uint8_t* plain, size_t size, uint8_t* out, Implementation impl) {
  if (impl == Implementation::kOpenSsl &&
      internal::OpenSslSeal(key, nonce, ad, ad_size, plain, size, out)) {
    return;
  }
  SodiumSeal(key, nonce, ad, ad_size, plain, size, out);
}

bool Open(const uint8_t* key, const uint8_t* nonce, const uint8_t* ad, size_t ad_size,
          const uint8_t* sealed, size_t sealed_size, uint8_t* out, Implementation impl) {
  if (sealed_size < kTagSize) return false;
  if (impl == Implementation::kOpenSsl) {
    if (internal::OpenSslOpen(key, nonce, ad, ad_size, sealed, sealed_size, out)) return true;
    // A wrong tag, or OpenSSL failing for another reason: libsodium decides which. What
    // OpenSSL decrypted is unchecked: it goes now, whatever libsodium does with `out`.
    sodium_memzero(out, sealed_size - kTagSize);
  }
  return SodiumOpen(key, nonce, ad, ad_size, sealed, sealed_size, out);
}

namespace internal {

bool OpenSslKeyedDigest(const uint8_t* key, const uint8_t* data, size_t size, uint8_t* out) {
  const OpenSslMethods* m = WorkingOpenSsl();
  return m != nullptr && DigestWith(*m, key, data, size, out);
}

bool OpenSslSeal(const uint8_t* key, const uint8_t* nonce, const uint8_t* ad, size_t ad_size,
                 const uint8_t* plain, size_t size, uint8_t* out) {
  const OpenSslMethods* m = WorkingOpenSsl();
  return m != nullptr && SealWith(*m, key, nonce, ad, ad_size, plain, size, out);
}

bool OpenSslOpen(const uint8_t* key, const uint8_t* nonce, const uint8_t* ad, size_t ad_size,
                 const uint8_t* sealed, size_t sealed_size, uint8_t* out) {
  const OpenSslMethods* m = WorkingOpenSsl();
  return m != nullptr && sealed_size >= kTagSize &&
         OpenWith(*m, key, nonce, ad, ad_size, sealed, sealed_size, out);
}

}  // namespace internal

}  // namespace wanbackup::pipeline::primitives
