// Where secrets live: locked, undumpable libsodium memory, wiped on the way out.
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "common/secret.h"
#include "repository/keys.h"

using namespace wanbackup;
using namespace wanbackup::pipeline;

namespace {

// ASan, UBSan's runtime and TSan intercept mlock() and make it a no-op, so under a sanitizer the
// kernel never marks the pages locked: only the release build can check "lo".
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kMlockWorks = false;
#else
constexpr bool kMlockWorks = true;
#endif

// The VmFlags line of the mapping in /proc/self/smaps that holds `p` ("" when none does).
std::string VmFlagsOf(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long long lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (line.find("VmFlags:") == 0) {
      if (inside) return line;
      continue;
    }
    if ((head >> std::hex >> lo >> dash >> hi) && dash == '-') inside = addr >= lo && addr < hi;
  }
  return "";
}

bool HasFlag(const std::string& vmflags, const char* flag) {
  return (vmflags + " ").find(std::string(" ") + flag + " ") != std::string::npos;
}

}  // namespace

TEST_CASE("secret: the bytes are locked and left out of core dumps", "[secret]") {
  Secret s("hunter2");
  const std::string flags = VmFlagsOf(s.storage());
  INFO(flags);
  CHECK(HasFlag(flags, "dd"));                   // MADV_DONTDUMP
  if (kMlockWorks) CHECK(HasFlag(flags, "lo"));  // mlock
  int on_the_stack = 0;
  CHECK_FALSE(HasFlag(VmFlagsOf(&on_the_stack), "dd"));  // the check can tell them apart
}

TEST_CASE("secret: an empty secret owns no memory, and moving hands the block over", "[secret]") {
  Secret empty;
  CHECK(empty.storage() == nullptr);
  CHECK(std::string(empty.c_str()).empty());
  Secret a("abc");
  const void* block = a.storage();
  Secret b = std::move(a);
  CHECK(b.storage() == block);
  CHECK(a.storage() == nullptr);  // NOLINT(bugprone-use-after-move): the point of the test
  CHECK(b.reveal() == "abc");
  a = std::move(b);
  CHECK(a.reveal() == "abc");
  CHECK(b.empty());  // NOLINT(bugprone-use-after-move)
}

TEST_CASE("secret: growing keeps the bytes, shrinking wipes the tail, c_str ends at size",
          "[secret]") {
  Secret s("0123456789");
  s.Resize(4);
  CHECK(s.reveal() == "0123");
  CHECK(std::string(s.c_str()) == "0123");
  CHECK(s.data()[5] == '\0');  // the dropped bytes are gone, not just hidden
  const std::string big(5000, 'x');
  s.Resize(4 + big.size());
  std::copy(big.begin(), big.end(), s.data() + 4);
  CHECK(s.reveal() == "0123" + big);
  CHECK(HasFlag(VmFlagsOf(s.storage()), "dd"));
  CHECK(s.Clone().reveal() == s.reveal());
  CHECK(s.Clone().storage() != s.storage());
}

TEST_CASE("secure key: locked, read-only once sealed, compared in constant time", "[keys]") {
  REQUIRE(InitCrypto().ok());
  SecureKey k = RandomKey();
  CHECK(k.sealed());
  const std::string flags = VmFlagsOf(k.data());
  INFO(flags);
  CHECK(HasFlag(flags, "dd"));
  if (kMlockWorks) CHECK(HasFlag(flags, "lo"));
  CHECK(HasFlag(flags, "rd"));
  CHECK_FALSE(HasFlag(flags, "wr"));  // sealed: not writable
  const SecureKey copy = k.Clone();
  CHECK(copy == k);
  CHECK(copy.data() != k.data());
  CHECK_FALSE(RandomKey() == k);
  SecureKey moved = std::move(k);
  CHECK(moved == copy);
  CHECK(k.data() == nullptr);  // NOLINT(bugprone-use-after-move)
}

TEST_CASE("key set: copies share one locked block of subkeys", "[keys]") {
  REQUIRE(InitCrypto().ok());
  const KeySet keys(RandomKey());
  const KeySet copy = keys;  // NOLINT(performance-unnecessary-copy-initialization)
  CHECK(copy.data_key().data() == keys.data_key().data());
  CHECK(HasFlag(VmFlagsOf(keys.data_key().data()), "dd"));
}

TEST_CASE("kdf: costs outside libsodium's minimum and our maximum are refused", "[keys]") {
  KdfParams p;
  CHECK(CheckKdfParams(p).ok());
  p.opslimit = 1;
  p.memlimit = 8 << 20;  // what the unit tests use
  CHECK(CheckKdfParams(p).ok());
  p.memlimit = kMaxKdfMemory;
  CHECK(CheckKdfParams(p).ok());
  p.memlimit = kMaxKdfMemory + 1;
  CHECK(CheckKdfParams(p).code() == StatusCode::kInvalidArgument);
  p.memlimit = 1ull << 40;
  CHECK(CheckKdfParams(p).message().find("KDF memory 1.00 TiB is out of range") !=
        std::string::npos);
  p.memlimit = kMinKdfMemory - 1;
  CHECK_FALSE(CheckKdfParams(p).ok());
  p.memlimit = 8 << 20;
  p.opslimit = 0;
  CHECK_FALSE(CheckKdfParams(p).ok());
  p.opslimit = kMaxKdfOps + 1;
  CHECK_FALSE(CheckKdfParams(p).ok());
}

TEST_CASE("kdf: a cost may be raised or kept, never lowered", "[keys]") {
  KdfParams now;
  now.opslimit = 3;
  now.memlimit = 128 << 20;
  KdfParams next = now;
  CHECK(CheckKdfRaise(now, next).ok());
  next.memlimit = 256 << 20;
  next.opslimit = 4;
  CHECK(CheckKdfRaise(now, next).ok());
  next.memlimit = 64 << 20;
  CHECK(CheckKdfRaise(now, next).code() == StatusCode::kInvalidArgument);
  CHECK(CheckKdfRaise(now, next).message().find("below") != std::string::npos);
  next.memlimit = 128 << 20;
  next.opslimit = 2;
  CHECK_FALSE(CheckKdfRaise(now, next).ok());
  next.opslimit = kMaxKdfOps + 1;
  CHECK_FALSE(CheckKdfRaise(now, next).ok());  // raised, but past the range
}

TEST_CASE("kdf: KeyFromPassphrase refuses an absurd stored cost instead of running it", "[keys]") {
  REQUIRE(InitCrypto().ok());
  KdfParams p = NewKdfParams();
  p.memlimit = 1ull << 40;
  CHECK(KeyFromPassphrase(Secret("pw"), p).status().code() == StatusCode::kInvalidArgument);
}
