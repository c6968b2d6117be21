#include "shaper.h"

#include <catch2/catch.hpp>

using wanem::Admission;
using wanem::LinkParams;
using wanem::Shaper;
using wanem::Verdict;

constexpr int64_t kMs = 1'000'000;

TEST_CASE("shaper: without a rate limit a packet leaves exactly one delay later", "[wanem]") {
  Shaper s(1);
  LinkParams p;
  p.delay_ns = 20 * kMs;
  s.SetParams(p);
  Admission a = s.Admit(1000 * kMs, 1500);
  CHECK(a.verdict == Verdict::kForward);
  CHECK(a.release_ns == 1020 * kMs);
}

TEST_CASE("shaper: the rate limit serializes packets back to back", "[wanem]") {
  Shaper s(1);
  LinkParams p;
  p.rate_bps = 1'000'000'000;  // 1500 bytes take 12 us
  s.SetParams(p);
  const int64_t t0 = 5000 * kMs;
  CHECK(s.Admit(t0, 1500).release_ns == t0 + 12'000);
  CHECK(s.Admit(t0, 1500).release_ns == t0 + 24'000);
  CHECK(s.Admit(t0 + 100 * kMs, 1500).release_ns == t0 + 100 * kMs + 12'000);
}

TEST_CASE("shaper: the drop-tail queue drops what would overflow it and nothing else", "[wanem]") {
  Shaper s(1);
  LinkParams p;
  p.rate_bps = 8'000'000;  // 1 byte per microsecond
  p.queue_bytes = 10'000;
  s.SetParams(p);
  const int64_t t0 = 1000 * kMs;
  int forwarded = 0, dropped = 0;
  for (int i = 0; i < 20; ++i) {
    (s.Admit(t0, 1000).verdict == Verdict::kForward ? forwarded : dropped)++;
  }
  // The limit counts every byte not yet sent, the packet on the wire included.
  CHECK(forwarded == 10);
  CHECK(dropped == 10);
  CHECK(s.BacklogBytes(t0) == 10'000);
  // Once the serializer has sent 5,000 bytes, 5 more fit again.
  int later = 0;
  for (int i = 0; i < 10; ++i)
    later += s.Admit(t0 + 5 * kMs, 1000).verdict == Verdict::kForward;
  CHECK(later == 5);
}

TEST_CASE("shaper: random loss drops about the asked share reproducibly", "[wanem]") {
  LinkParams p;
  p.loss = 0.1;
  auto count_drops = [&p](uint64_t seed) {
    Shaper s(seed);
    s.SetParams(p);
    int drops = 0;
    for (int i = 0; i < 100'000; ++i)
      drops += s.Admit(i, 100).verdict == Verdict::kDropLoss;
    return drops;
  };
  const int drops = count_drops(42);
  CHECK(drops > 9'500);
  CHECK(drops < 10'500);
  CHECK(count_drops(42) == drops);
  CHECK(count_drops(43) != drops);
}

TEST_CASE("shaper: a shorter delay never lets a packet overtake an earlier one", "[wanem]") {
  Shaper s(1);
  LinkParams p;
  p.delay_ns = 64 * kMs;
  s.SetParams(p);
  const Admission first = s.Admit(100 * kMs, 100);
  p.delay_ns = 1 * kMs;
  s.SetParams(p);
  const Admission second = s.Admit(101 * kMs, 100);
  CHECK(second.release_ns >= first.release_ns);
  const Admission much_later = s.Admit(500 * kMs, 100);
  CHECK(much_later.release_ns == 501 * kMs);
}

TEST_CASE("shaper: a blackhole drops everything until it ends", "[wanem]") {
  Shaper s(1);
  LinkParams p;
  p.blackhole_until_ns = 2000 * kMs;
  s.SetParams(p);
  CHECK(s.Admit(1999 * kMs, 100).verdict == Verdict::kDropBlackhole);
  CHECK(s.BlackholedAt(1999 * kMs));
  CHECK(s.Admit(2000 * kMs, 100).verdict == Verdict::kForward);
}

TEST_CASE("shaper: departures wake on a grid of at most 50 us, never early", "[wanem]") {
  Shaper s(1);
  LinkParams p;
  s.SetParams(p);  // no delay (a LAN): exact
  CHECK(s.WakeAt(1'234'567) == 1'234'567);
  p.delay_ns = 400'000;  // 0.4 ms: a step of 20 us
  s.SetParams(p);
  CHECK(s.WakeAt(1'000'001) == 1'020'000);
  CHECK(s.WakeAt(1'020'000) == 1'020'000);
  p.delay_ns = 64 * kMs;  // long delays: 50 us
  s.SetParams(p);
  CHECK(s.WakeAt(5000 * kMs + 1) == 5000 * kMs + 50'000);
  CHECK(s.WakeAt(5000 * kMs + 49'999) == 5000 * kMs + 50'000);
  CHECK(s.WakeAt(5000 * kMs + 50'001) == 5000 * kMs + 100'000);
}
