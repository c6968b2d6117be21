#include "repository/primitives.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>
#include <sodium.h>

#include "repository/keys.h"

using wanbackup::pipeline::primitives::Implementation;
namespace primitives = wanbackup::pipeline::primitives;

namespace {

constexpr Implementation kSodium = Implementation::kLibsodium;
constexpr Implementation kOpenSsl = Implementation::kOpenSsl;

std::vector<uint8_t> Random(size_t size) {
  std::vector<uint8_t> v(size);
  if (size > 0) randombytes_buf(v.data(), v.size());  // declared nonnull; an empty vector's is null
  return v;
}

std::vector<uint8_t> Sealed(Implementation impl, const std::vector<uint8_t>& key,
                            const std::vector<uint8_t>& nonce, const std::vector<uint8_t>& ad,
                            const std::vector<uint8_t>& plain) {
  std::vector<uint8_t> out(plain.size() + primitives::kTagSize);
  primitives::Seal(key.data(), nonce.data(), ad.data(), ad.size(), plain.data(), plain.size(),
                   out.data(), impl);
  return out;
}

bool Opens(Implementation impl, const std::vector<uint8_t>& key, const std::vector<uint8_t>& nonce,
           const std::vector<uint8_t>& ad, const std::vector<uint8_t>& sealed,
           std::vector<uint8_t>* plain) {
  plain->assign(sealed.size() - primitives::kTagSize, 0);
  return primitives::Open(key.data(), nonce.data(), ad.data(), ad.size(), sealed.data(),
                          sealed.size(), plain->data(), impl);
}

}  // namespace

TEST_CASE("primitives: Debian's libcrypto is used unless the environment says libsodium",
          "[primitives]") {
  REQUIRE(wanbackup::pipeline::InitCrypto().ok());
  const char* env = std::getenv(primitives::kImplementationEnv);
  if (env != nullptr && std::string_view(env) == "libsodium") {
    CHECK(primitives::Active() == kSodium);
  } else {
    // Without this the cases below would compare libsodium with its own fallback.
    CHECK(primitives::Active() == kOpenSsl);
  }
  CHECK(primitives::Describe(kOpenSsl).rfind("OpenSSL 3.", 0) == 0);
  CHECK(primitives::Describe(kSodium).rfind("libsodium 1.", 0) == 0);
}

TEST_CASE("primitives: OpenSSL and libsodium give the same digests and sealed bytes",
          "[primitives]") {
  REQUIRE(wanbackup::pipeline::InitCrypto().ok());
  // Sizes around OpenSSL's and libsodium's block and buffering boundaries, and a chunk.
  for (const size_t size :
       {0, 1, 15, 16, 63, 64, 65, 127, 128, 129, 255, 256, 1000, 4096, 65537, 4 << 20}) {
    for (const size_t ad_size : {0, 1, 37, 38, 300}) {
      CAPTURE(size, ad_size);
      const auto key = Random(primitives::kKeySize);
      const auto nonce = Random(primitives::kNonceSize);
      const auto ad = Random(ad_size);
      const auto plain = Random(size);

      // OpenSSL alone (internal::, no fallback), so libsodium is not compared with itself.
      std::array<uint8_t, primitives::kDigestSize> d1, d2;
      primitives::KeyedDigest(key.data(), plain.data(), plain.size(), d1.data(), kSodium);
      REQUIRE(primitives::internal::OpenSslKeyedDigest(key.data(), plain.data(), plain.size(),
                                                       d2.data()));
      CHECK(d1 == d2);

      const auto s1 = Sealed(kSodium, key, nonce, ad, plain);
      std::vector<uint8_t> s2(plain.size() + primitives::kTagSize);
      REQUIRE(primitives::internal::OpenSslSeal(key.data(), nonce.data(), ad.data(), ad.size(),
                                                plain.data(), plain.size(), s2.data()));
      CHECK(s1 == s2);
      std::vector<uint8_t> opened(plain.size());
      CHECK(primitives::internal::OpenSslOpen(key.data(), nonce.data(), ad.data(), ad.size(),
                                              s1.data(), s1.size(), opened.data()));
      CHECK(opened == plain);
      CHECK(Opens(kSodium, key, nonce, ad, s2, &opened));
      CHECK(opened == plain);
      if (size > 4096) continue;  // the bit flips below are per byte

      // One flipped bit anywhere — ciphertext, tag, associated data, nonce — and neither opens.
      for (size_t i = 0; i < s1.size(); i += std::max<size_t>(1, s1.size() / 7)) {
        auto bad = s1;
        bad[i] ^= 0x10;
        CHECK_FALSE(primitives::internal::OpenSslOpen(
            key.data(), nonce.data(), ad.data(), ad.size(), bad.data(), bad.size(), opened.data()));
        // Through the fallback too, and what OpenSSL decrypted is not left behind.
        CHECK_FALSE(Opens(kOpenSsl, key, nonce, ad, bad, &opened));
        CHECK(std::all_of(opened.begin(), opened.end(), [](uint8_t b) { return b == 0; }));
        CHECK_FALSE(Opens(kSodium, key, nonce, ad, bad, &opened));
      }
      if (!ad.empty()) {
        auto bad_ad = ad;
        bad_ad.back() ^= 1;
        CHECK_FALSE(Opens(kOpenSsl, key, nonce, bad_ad, s1, &opened));
      }
      auto bad_nonce = nonce;
      bad_nonce[3] ^= 1;  // in the part that makes the subkey
      CHECK_FALSE(Opens(kOpenSsl, key, bad_nonce, ad, s1, &opened));
      bad_nonce = nonce;
      bad_nonce[20] ^= 1;  // in the part that becomes the IETF nonce
      CHECK_FALSE(Opens(kOpenSsl, key, bad_nonce, ad, s1, &opened));
    }
  }
}

TEST_CASE("primitives: a sealed payload shorter than a tag does not open", "[primitives]") {
  REQUIRE(wanbackup::pipeline::InitCrypto().ok());
  const auto key = Random(primitives::kKeySize);
  const auto nonce = Random(primitives::kNonceSize);
  std::array<uint8_t, 15> short_sealed{};
  std::array<uint8_t, 16> out{};
  for (const Implementation impl : {kSodium, kOpenSsl}) {
    CHECK_FALSE(primitives::Open(key.data(), nonce.data(), nullptr, 0, short_sealed.data(),
                                 short_sealed.size(), out.data(), impl));
  }
  CHECK_FALSE(primitives::internal::OpenSslOpen(
      key.data(), nonce.data(), nullptr, 0, short_sealed.data(), short_sealed.size(), out.data()));
}
