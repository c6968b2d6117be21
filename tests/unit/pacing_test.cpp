// Pacing (--limit-rate) on a virtual clock: the average it holds, the burst it allows after a
// pause, cancellation, and a paced source end to end.
#include "common/pacing.h"

#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "common/cancel.h"
#include "common/units.h"
#include "support/memory_block_io.h"

using namespace std::chrono_literals;
using wanbackup::PacedSource;
using wanbackup::Pacer;
using wanbackup::ParseByteRate;
using wanbackup::ReadRequest;
using wanbackup::Seconds;
using wanbackup::StatusCode;

namespace {

// A pacer whose sleeps advance a virtual clock instead of waiting.
class VirtualPacer : public Pacer {
 public:
  using Pacer::Pacer;
  void Advance(std::chrono::nanoseconds d) { now_ += d; }
  std::chrono::nanoseconds elapsed() const { return now_ - Clock::time_point{}; }

 protected:
  Clock::time_point Now() const override { return now_; }
  void SleepFor(std::chrono::nanoseconds d) override { now_ += d; }

 private:
  Clock::time_point now_{};
};

}  // namespace

TEST_CASE("pacing: rates parse as sizes per second or bit rates", "[pacing]") {
  CHECK(*ParseByteRate("20M") == 20u << 20);
  CHECK(*ParseByteRate("20M/s") == 20u << 20);
  CHECK(*ParseByteRate("20MiB/s") == 20u << 20);
  CHECK(*ParseByteRate("20MB/s") == 20000000u);
  CHECK(*ParseByteRate("160mbit") == 20000000u);
  CHECK(*ParseByteRate("unlimited") == 0u);
  CHECK_FALSE(ParseByteRate("fast").ok());
  CHECK_FALSE(ParseByteRate("20Mb").ok());  // "b" is never bytes
  CHECK_FALSE(ParseByteRate("/s").ok());
}

TEST_CASE("pacing: transfers average the rate, the first at once", "[pacing]") {
  const uint64_t rate = 20u << 20;
  VirtualPacer pacer(rate);
  const uint64_t piece = 512 << 10;
  REQUIRE(pacer.Take(piece).ok());
  CHECK(pacer.elapsed() == 0ns);
  for (int i = 1; i < 200; ++i)
    REQUIRE(pacer.Take(piece).ok());
  // 200 pieces start over 199 pieces' time: the next one would start at 200 x piece / rate.
  const double expected = 199.0 * piece / rate;
  CHECK(Seconds(pacer.elapsed()) == Approx(expected).epsilon(0.001));
}

TEST_CASE("pacing: a pause earns at most the burst allowance", "[pacing]") {
  const uint64_t rate = 10u << 20;
  VirtualPacer pacer(rate);
  REQUIRE(pacer.Take(1 << 20).ok());
  pacer.Advance(10s);  // idle: the unused budget is not kept beyond the burst
  const auto before = pacer.elapsed();
  const uint64_t burst_bytes = rate / 4;  // kPacingBurst = 250 ms
  REQUIRE(pacer.Take(burst_bytes).ok());
  CHECK(pacer.elapsed() == before);  // the burst goes at once
  REQUIRE(pacer.Take(1 << 20).ok());
  CHECK(pacer.elapsed() == before);  // it starts when the burst is paid for: now
  REQUIRE(pacer.Take(1 << 20).ok());
  CHECK(Seconds(pacer.elapsed() - before) == Approx(0.1).epsilon(0.001));  // 1 MiB at 10 MiB/s
}

TEST_CASE("pacing: threads share one budget", "[pacing]") {
  // Real clock, but no timing assertion: only that the shared budget never lets more through.
  Pacer pacer(uint64_t{1} << 40);  // fast enough that nobody waits long
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pacer] {
      for (int i = 0; i < 100; ++i)
        (void)pacer.Take(4096);
    });
  }
  for (auto& t : threads)
    t.join();
  SUCCEED("no data race (the tsan tier checks)");
}

TEST_CASE("pacing: cancellation ends a wait and takes nothing", "[pacing]") {
  VirtualPacer pacer(1 << 20);
  REQUIRE(pacer.Take(10 << 20).ok());  // the next Take would wait 10 s
  wanbackup::RequestCancellation();
  auto status = pacer.Take(1 << 20);
  wanbackup::CancellationFlag() = false;
  CHECK(status.code() == StatusCode::kCancelled);
  CHECK(pacer.elapsed() == 0ns);
}

TEST_CASE("pacing: a paced source reads everything, in the rate's time", "[pacing]") {
  std::vector<uint8_t> data(8 << 20);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>(i * 131);
  auto pacer = std::make_shared<VirtualPacer>(4u << 20);
  PacedSource source(std::make_unique<wanbackup::testing::MemorySource>(data, 512), pacer);
  std::vector<uint8_t> out(data.size());
  const uint64_t piece = 256 << 10;
  size_t submitted = 0, done = 0;
  for (uint64_t off = 0; off < data.size(); off += piece) {
    ReadRequest r{off, piece, out.data() + off, off};
    REQUIRE(source.Submit(r).ok());
    ++submitted;
    if (submitted - done >= 4) {
      REQUIRE(source.Wait().ok());
      ++done;
    }
  }
  for (; done < submitted; ++done)
    REQUIRE(source.Wait().ok());
  CHECK(out == data);
  // 32 pieces of 256 KiB at 4 MiB/s: the last starts after 31 pieces' time.
  CHECK(Seconds(pacer->elapsed()) == Approx(31.0 * piece / (4 << 20)).epsilon(0.001));
}

TEST_CASE("pacing: a paced sink writes everything at the rate, all-zero writes unpaced",
          "[pacing]") {
  auto pacer = std::make_shared<VirtualPacer>(4u << 20);
  auto memory = std::make_unique<wanbackup::testing::MemorySink>(false, false);
  wanbackup::testing::MemorySink* inner = memory.get();
  wanbackup::PacedSink sink(std::move(memory), pacer);
  const size_t piece = 1 << 20;
  std::vector<uint8_t> data(piece, 0x5a), zeros(piece, 0);
  for (uint64_t i = 0; i < 8; ++i)
    REQUIRE(sink.Write(i * piece, data.data(), piece).ok());
  const auto after_data = pacer->elapsed();
  // 8 MiB at 4 MiB/s: the eighth write starts after seven pieces' time.
  CHECK(Seconds(after_data) == Approx(7.0 * piece / (4 << 20)).epsilon(0.001));
  for (uint64_t i = 8; i < 16; ++i)
    REQUIRE(sink.Write(i * piece, zeros.data(), piece).ok());
  CHECK(pacer->elapsed() == after_data);  // zeros go as WRITE SAME: no budget
  REQUIRE(sink.Finish(16 * piece).ok());
  CHECK(inner->bytes_written == 16 * piece);
  CHECK(inner->finished);
}
