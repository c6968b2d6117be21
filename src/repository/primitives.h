// The two primitives every chunk goes through — keyed BLAKE2b-256 (its digest) and
// XChaCha20-Poly1305-IETF (its sealed payload) — computed by OpenSSL's libcrypto when it has
// them, and by libsodium otherwise. Both give the same bytes, so which one ran leaves no trace
// in a repository and either opens what the other wrote (docs/format.md, "Chunks and digests").
// OpenSSL 3.0
// is 1.9x (BLAKE2b) and 3-4x (ChaCha20-Poly1305) faster than Debian's libsodium 1.0.18 on
// the lab's CPUs: docs/performance/log/2026-11-27-crypto-implementations.md.
//
// XChaCha20-Poly1305-IETF is RFC 8439's ChaCha20-Poly1305 under the subkey HChaCha20(key,
// nonce[0..16]) with the 12-byte nonce 0^4 || nonce[16..24]; the subkey comes from libsodium
// (crypto_core_hchacha20) and the AEAD from OpenSSL. Keys stay in libsodium's guarded memory;
// OpenSSL holds a copy (the digest or config key, or the per-record subkey) in its ordinary
// heap for the length of one call and wipes it when the call's context is freed
// (docs/threat-model.md).
//
// All functions are thread-safe: each call has its own OpenSSL context. Any OpenSSL failure
// (say, allocation) falls back to libsodium for that call, so callers see no new error. `out`
// must not overlap the input: the fallback reads the input again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/result.h"

namespace wanbackup::pipeline::primitives {

inline constexpr size_t kKeySize = 32;
inline constexpr size_t kDigestSize = 32;
inline constexpr size_t kNonceSize = 24;
inline constexpr size_t kTagSize = 16;

enum class Implementation { kLibsodium, kOpenSsl };

// The environment variable that picks the implementation: "libsodium" or "openssl"; unset or
// empty picks OpenSSL when it works (bench/pipeline compares the two).
inline constexpr char kImplementationEnv[] = "WANBACKUP_CRYPTO";

// OK when $WANBACKUP_CRYPTO is unset, empty, "libsodium", or "openssl" with a libcrypto that has
// BLAKE2BMAC and ChaCha20-Poly1305 and agrees with libsodium on a known input. InvalidArgument
// naming any other value; Unsupported for "openssl" when OpenSSL cannot be used. InitCrypto
// calls it, so a command that opens a repository stops on a typo.
Status CheckImplementationChoice();
// What this process uses, chosen once on first use: OpenSSL when $WANBACKUP_CRYPTO is unset,
// empty or "openssl" and OpenSSL works; libsodium otherwise (also for a value
// CheckImplementationChoice refuses).
Implementation Active();
// "OpenSSL 3.0.19" or "libsodium 1.0.18": the library doing the work for `impl`.
std::string Describe(Implementation impl);

// out[0..32) = keyed BLAKE2b-256 of data[0..size) under key[0..32).
void KeyedDigest(const uint8_t* key, const uint8_t* data, size_t size, uint8_t* out,
                 Implementation impl = Active());

// out[0..size + kTagSize) = the ciphertext of plain[0..size), then the tag, under key and the
// 24-byte nonce, authenticating ad[0..ad_size) too.
void Seal(const uint8_t* key, const uint8_t* nonce, const uint8_t* ad, size_t ad_size,
          const uint8_t* plain, size_t size, uint8_t* out, Implementation impl = Active());

// out[0..sealed_size - kTagSize) = the plaintext of sealed[0..sealed_size) (ciphertext, then
// tag). False when the tag does not verify or sealed_size < kTagSize; `out` then holds zeros or
// nothing written.
[[nodiscard]] bool Open(const uint8_t* key, const uint8_t* nonce, const uint8_t* ad, size_t ad_size,
                        const uint8_t* sealed, size_t sealed_size, uint8_t* out,
                        Implementation impl = Active());

namespace internal {
// OpenSSL alone, no fallback: false when OpenSSL is unusable or any call failed (for Open, a
// wrong tag too). For tests, which must know that OpenSSL itself produced what they compare.
bool OpenSslKeyedDigest(const uint8_t* key, const uint8_t* data, size_t size, uint8_t* out);
bool OpenSslSeal(const uint8_t* key, const uint8_t* nonce, const uint8_t* ad, size_t ad_size,
                 const uint8_t* plain, size_t size, uint8_t* out);
bool OpenSslOpen(const uint8_t* key, const uint8_t* nonce, const uint8_t* ad, size_t ad_size,
                 const uint8_t* sealed, size_t sealed_size, uint8_t* out);
}  // namespace internal

}  // namespace wanbackup::pipeline::primitives
