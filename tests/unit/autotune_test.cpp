#include "initiator/autotune.h"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using wanbackup::initiator::ConnectionScaler;
using wanbackup::initiator::MaxConnections;
using wanbackup::initiator::PlanTransfer;
using wanbackup::initiator::TuningPlan;
using wanbackup::initiator::TuningRequest;

namespace {

TuningRequest Lun(std::chrono::nanoseconds rtt) {
  TuningRequest r;
  r.rtt = rtt;
  r.block_size = 512;
  r.lun_size = 1ull << 40;
  return r;
}

}  // namespace

TEST_CASE("autotune: one connection on a LAN and more the longer the round trip", "[autotune]") {
  CHECK(PlanTransfer(Lun(100us)).connections == 1);
  CHECK(PlanTransfer(Lun(1900us)).connections == 1);
  CHECK(PlanTransfer(Lun(2100us)).connections == 4);
  CHECK(PlanTransfer(Lun(8ms)).connections == 4);
  CHECK(PlanTransfer(Lun(30ms)).connections == 8);
  CHECK(PlanTransfer(Lun(62ms)).connections == 16);
  CHECK(PlanTransfer(Lun(105ms)).connections == 16);
  CHECK(PlanTransfer(Lun(250ms)).connections == 16);
}

TEST_CASE(
    "autotune: more than 16 connections only where 16 receive windows do not hold the "
    "round trip",
    "[autotune]") {
  // 1.5 x 125 MB/s x RTT in windows of 3 MiB (Linux's default receive window at most).
  CHECK(MaxConnections(2ms) == 16);
  CHECK(MaxConnections(260ms) == 16);  // 15.5 windows
  CHECK(MaxConnections(300ms) == 18);  // 150 ms one-way
  CHECK(MaxConnections(400ms) == 24);  // 200 ms one-way
  CHECK(MaxConnections(2s) == 32);
  CHECK(PlanTransfer(Lun(300ms)).connections == 18);
  const TuningPlan far = PlanTransfer(Lun(400ms));
  CHECK(far.connections == 24);
  CHECK(far.max_connections == 24);
  // Together still one bandwidth-delay product (50 MB): 24 x 8 x 256 KiB.
  CHECK(far.queue_depth == 8);
  CHECK(PlanTransfer(Lun(2s)).connections == 32);
  CHECK(MaxConnections(268ms) == 16);  // 15.98 windows
  CHECK(MaxConnections(270ms) == 17);
  // The memory cap binds as before: N shrinks first (15 MiB of buffers: 24 x 2 x 256 KiB = 12).
  TuningRequest tight = Lun(400ms);
  tight.max_memory = 20ull << 20;
  const TuningPlan small = PlanTransfer(tight);
  CHECK(small.connections == 24);
  CHECK(small.queue_depth == 1);
}

TEST_CASE("autotune: 256 KiB READs, together one bandwidth-delay product in flight", "[autotune]") {
  const TuningPlan lan = PlanTransfer(Lun(500us));
  CHECK(lan.connections == 1);
  CHECK(lan.io_size == 256u << 10);
  CHECK(lan.queue_depth == 4);  // never less than 1 MiB: the next READs wait when one completes

  const TuningPlan wan = PlanTransfer(Lun(32ms));  // 8 connections x 4 x 256 KiB >= 4 MB
  CHECK(wan.io_size == 256u << 10);
  CHECK(wan.queue_depth == 4);
  CHECK(wan.adapt_connections);
  CHECK(wan.max_connections >= wan.connections);

  CHECK(PlanTransfer(Lun(128ms)).queue_depth == 4);  // 16 x 1 MiB >= 16 MB
  const TuningPlan far = PlanTransfer(Lun(200ms));   // 16 x 1.5 MiB >= 25 MB
  INFO(far.explanation << " n=" << far.queue_depth << " b=" << far.io_size);
  CHECK(far.connections == 16);
  CHECK(far.queue_depth == 6);
  const uint64_t in_flight = static_cast<uint64_t>(far.connections) * far.queue_depth * far.io_size;
  CHECK(in_flight >= 25'000'000);
  // No more per connection than the target's socket takes (4 MiB), however long the link.
  CHECK(PlanTransfer(Lun(2s)).queue_depth == 16);

  TuningRequest large = Lun(200ms);  // larger READs: fewer of them, the same bytes outstanding
  large.io_size = 512 << 10;
  CHECK(PlanTransfer(large).queue_depth == 3);
  large.rtt = 500us;  // and the same 1 MiB per connection on a LAN
  CHECK(PlanTransfer(large).queue_depth == 2);

  TuningRequest tiny = Lun(500us);  // 1 MiB of 4 KiB READs would be 256: N stays within 64
  tiny.io_size = 4 << 10;
  CHECK(PlanTransfer(tiny).queue_depth == 64);

  TuningRequest big = Lun(32ms);  // the user's B is kept; N never drops below 2
  big.io_size = 8 << 20;
  CHECK(PlanTransfer(big).io_size == 8u << 20);
  CHECK(PlanTransfer(big).queue_depth == 2);
}

TEST_CASE("autotune: the paper's baseline is taken as given", "[autotune]") {
  TuningRequest r = Lun(32ms);
  r.connections = 1;
  r.queue_depth = 1;
  r.io_size = 128 << 10;
  const TuningPlan p = PlanTransfer(r);
  CHECK(p.connections == 1);
  CHECK(p.queue_depth == 1);
  CHECK(p.io_size == 128u << 10);
  CHECK_FALSE(p.adapt_connections);
}

TEST_CASE("autotune: the memory cap shrinks queue depth first and then connections", "[autotune]") {
  TuningRequest r = Lun(200ms);
  r.max_memory = 10ull << 20;  // 7.5 MiB of buffers after the program's own share
  const TuningPlan p = PlanTransfer(r);
  const uint64_t buffers = static_cast<uint64_t>(p.connections) * (p.queue_depth + 1) * p.io_size;
  CHECK(buffers <= 7.5 * (1 << 20));
  CHECK(p.queue_depth == 1);
  CHECK(p.connections == 15);
  CHECK(p.io_size == 256u << 10);
  r.max_memory = 20ull << 20;  // 15 MiB: N alone shrinks, 16 x 3 x 256 KiB
  CHECK(PlanTransfer(r).queue_depth == 2);
  CHECK(PlanTransfer(r).connections == 16);
  CHECK(p.explanation.find("--max-memory") != std::string::npos);
}

TEST_CASE("autotune: READs never exceed the LUN's transfer limit nor the LUN itself",
          "[autotune]") {
  TuningRequest r = Lun(10ms);
  r.max_transfer_bytes = 256 << 10;
  CHECK(PlanTransfer(r).io_size == 256u << 10);
  TuningRequest tiny = Lun(10ms);
  tiny.lun_size = 100 * 512;
  CHECK(PlanTransfer(tiny).io_size == 100u * 512);
  TuningRequest odd = Lun(10ms);
  odd.block_size = 4096;
  odd.io_size = 1000000;  // not a multiple of the block size
  CHECK(PlanTransfer(odd).io_size % 4096 == 0);
}

TEST_CASE("connection scaler: adds half again as many while each step pays 20 percent",
          "[autotune]") {
  ConnectionScaler s(4, 16);
  CHECK(s.OnMeasurement(4, 80e6) == 6);
  CHECK(s.OnMeasurement(6, 100e6) == 9);  // +25 %: keep going
  CHECK(s.OnMeasurement(9, 105e6) == 9);  // +5 %: the link is full
  CHECK(s.settled());
  CHECK(s.best_rate() == Approx(105e6));
}

TEST_CASE("connection scaler: adds connections only while each is near its own ceiling",
          "[autotune]") {
  // 32 ms RTT: one tgt connection alone carries about 2.5 MB / 32 ms = 78 MB/s.
  const double ceiling = wanbackup::initiator::kWindowBytesPerRtt / 0.032;
  ConnectionScaler full(9, 16);
  CHECK(full.OnMeasurement(9, 117e6, ceiling) == 9);  // 13 MB/s each: the link is the limit
  CHECK(full.settled());
  ConnectionScaler starved(4, 16);
  CHECK(starved.OnMeasurement(4, 300e6, ceiling) == 6);  // 75 MB/s each: windows are the limit
  CHECK_FALSE(starved.settled());
}

TEST_CASE("connection scaler: a step that cost throughput is undone", "[autotune]") {
  ConnectionScaler s(4, 16);
  CHECK(s.OnMeasurement(4, 80e6) == 6);
  CHECK(s.OnMeasurement(6, 100e6) == 9);
  CHECK(s.OnMeasurement(9, 70e6) == 6);  // -30 %: back to the best count
  CHECK(s.settled());
  ConnectionScaler noise(4, 16);
  CHECK(noise.OnMeasurement(4, 80e6) == 6);
  CHECK(noise.OnMeasurement(6, 76e6) == 6);  // -5 %: noise, not worth a change
  CHECK(noise.settled());
}

TEST_CASE("connection scaler: never beyond its maximum", "[autotune]") {
  ConnectionScaler s(10, 12);
  CHECK(s.OnMeasurement(10, 200e6) == 12);
  CHECK(s.OnMeasurement(12, 300e6) == 12);
  CHECK(s.settled());
}

TEST_CASE("sharing commands: the connection that would finish one first gets it", "[autotune]") {
  using wanbackup::initiator::ChooseConnection;
  using wanbackup::initiator::ConnectionLoad;
  // Two commands each: the one delivering 40 MB/s finishes a third sooner than the 10 MB/s one.
  std::vector<ConnectionLoad> c{{true, 2, 10e6}, {true, 2, 40e6}};
  CHECK(ChooseConnection(c, 4, 8, 4) == 1);
  // Even with three queued, 4 / 40 MB/s beats 2 / 10 MB/s.
  c = {{true, 1, 10e6}, {true, 3, 40e6}};
  CHECK(ChooseConnection(c, 4, 8, 4) == 1);
  // But not beyond the per-connection limit.
  c = {{true, 1, 10e6}, {true, 4, 40e6}};
  CHECK(ChooseConnection(c, 5, 8, 4) == 0);
}

TEST_CASE("sharing commands: an idle connection first, a broken one never", "[autotune]") {
  using wanbackup::initiator::ChooseConnection;
  using wanbackup::initiator::ConnectionLoad;
  std::vector<ConnectionLoad> c{{true, 1, 90e6}, {true, 0, 1e6}, {false, 0, 0}};
  CHECK(ChooseConnection(c, 1, 8, 4) == 1);  // a slow connection keeps one command at least
  c = {{true, 2, 90e6}, {false, 0, 0}};
  CHECK(ChooseConnection(c, 2, 8, 4) == 0);
  c = {{false, 0, 0}, {false, 0, 0}};
  CHECK(ChooseConnection(c, 0, 8, 4) == -1);
}

TEST_CASE("sharing commands: never more than C x N in flight in all", "[autotune]") {
  using wanbackup::initiator::ChooseConnection;
  using wanbackup::initiator::ConnectionLoad;
  std::vector<ConnectionLoad> c{{true, 2, 10e6}, {true, 2, 40e6}};
  CHECK(ChooseConnection(c, 4, 4, 4) == -1);  // C = 2, N = 2: the budget is spent
  c = {{true, 4, 10e6}, {true, 4, 40e6}};
  CHECK(ChooseConnection(c, 8, 16, 4) == -1);  // every connection at its limit
}

TEST_CASE("sharing commands: a connection whose rate is not known yet counts as average",
          "[autotune]") {
  using wanbackup::initiator::ChooseConnection;
  using wanbackup::initiator::ConnectionLoad;
  // Average of the known: 20 MB/s. The new one: 3 / 20 MB/s = 150 ms; the 10 MB/s one:
  // 2 / 10 MB/s = 200 ms; the 30 MB/s one is at its limit.
  std::vector<ConnectionLoad> c{{true, 1, 10e6}, {true, 4, 30e6}, {true, 2, 0}};
  CHECK(ChooseConnection(c, 7, 16, 4) == 2);
}

TEST_CASE("sharing commands: twice N per connection, within the target's socket", "[autotune]") {
  using wanbackup::initiator::PerConnectionLimit;
  CHECK(PerConnectionLimit(2, 512 << 10) == 4);
  CHECK(PerConnectionLimit(3, 512 << 10) == 6);
  CHECK(PerConnectionLimit(8, 512 << 10) == 8);  // 4 MiB: what tgt's socket takes
  CHECK(PerConnectionLimit(2, 4 << 20) == 2);    // never below N
  CHECK(PerConnectionLimit(1, 128 << 10) == 2);  // the paper's baseline has C = 1: budget 1
}

TEST_CASE("coalescing completions: none with one READ in flight or no rate measured",
          "[autotune]") {
  using wanbackup::initiator::ServiceInterval;
  CHECK(ServiceInterval(1, 128 << 10, 100e6).count() == 0);  // the paper's baseline
  CHECK(ServiceInterval(1, 4 << 20, 100e6).count() == 0);    // the paper's prototype
  CHECK(ServiceInterval(18, 512 << 10, 0).count() == 0);     // start-up: rate not known
  CHECK(ServiceInterval(0, 512 << 10, 100e6).count() == 0);
}

TEST_CASE("coalescing completions: an eighth of what the other READs cover, at most 1 ms",
          "[autotune]") {
  using wanbackup::initiator::kMaxServiceInterval;
  using wanbackup::initiator::ServiceInterval;
  // 0 ms, one connection, 2 x 512 KiB at 250 MB/s: the other READ covers 2.1 ms.
  CHECK(ServiceInterval(2, 512 << 10, 250e6) == std::chrono::nanoseconds(262144));
  // 16 ms one-way, 9 x 2 x 512 KiB at 110 MB/s: 81 ms of cover, capped.
  CHECK(ServiceInterval(18, 512 << 10, 110e6) == kMaxServiceInterval);
  // Small READs on a fast link: a few microseconds only.
  CHECK(ServiceInterval(2, 32 << 10, 200e6) < 25us);
}

TEST_CASE("autotune: WRITEs of the immediate data plus one burst, enough of them for the R2Ts",
          "[autotune][write]") {
  using wanbackup::initiator::NegotiatedParams;
  using wanbackup::initiator::PlanWrite;
  using wanbackup::initiator::UnsolicitedWriteBytes;
  using wanbackup::initiator::WriteRoundTrips;
  // tgt's defaults against libiscsi 1.19's offer: InitialR2T=Yes, ImmediateData=Yes,
  // FirstBurstLength 64 KiB, MaxBurstLength 256 KiB, the target takes 8 KiB PDUs.
  NegotiatedParams tgt;
  tgt.initial_r2t = true;
  tgt.immediate_data = true;
  tgt.first_burst_length = 64 << 10;
  tgt.max_burst_length = 256 << 10;
  tgt.target_max_recv_data_segment_length = 8 << 10;
  CHECK(UnsolicitedWriteBytes(tgt) == 8 << 10);
  CHECK(WriteRoundTrips(8 << 10, tgt) == 1);
  CHECK(WriteRoundTrips(264 << 10, tgt) == 2);
  CHECK(WriteRoundTrips(4 << 20, tgt) == 17);

  const TuningPlan at32 = PlanWrite(Lun(32ms), tgt);
  CHECK(at32.io_size == 264u << 10);
  // Every connection the round trip allows (a read starts with 8 here).
  CHECK(at32.connections == 16);
  CHECK(PlanTransfer(Lun(32ms)).connections == 8);
  // 2 (margin) x 125 MB/s x (32 ms x 2 round trips + 200 ms of loss recovery) / 264 KiB = 245
  // WRITEs in flight, 16 per connection: the same memory as over 8.
  CHECK(at32.queue_depth == 16);
  CHECK(PlanWrite(Lun(8ms), tgt).connections == 16);
  CHECK(PlanWrite(Lun(1900us), tgt).connections == 1);  // a LAN
  CHECK(PlanWrite(Lun(2100us), tgt).connections == 16);
  // What the user gives is kept: connections, or N per connection (then C is a read's).
  TuningRequest given = Lun(32ms);
  given.connections = 9;
  CHECK(PlanWrite(given, tgt).connections == 9);
  CHECK(PlanWrite(given, tgt).queue_depth == 28);
  given = Lun(32ms);
  given.queue_depth = 10;
  CHECK(PlanWrite(given, tgt).connections == 8);
  CHECK(PlanWrite(given, tgt).queue_depth == 10);
  // More connections only where their spare buffers fit the memory cap as it is; else a read's
  // count, and FitMemory as before.
  TuningRequest tight = Lun(32ms);
  tight.max_memory = 32ull << 20;  // 24 MiB of buffers: 8 x 11 x 264 KiB (88 WRITEs)
  const TuningPlan small = PlanWrite(tight, tgt);
  CHECK(small.connections == 8);
  CHECK(small.connections * small.queue_depth == 80);
  // 200 ms one-way: a read's 24 connections (the most there); 925 WRITEs with a spare buffer
  // each do not fit 240 MiB, so FitMemory trims N to 37 (888 in flight).
  const TuningPlan far = PlanWrite(Lun(400ms), tgt);
  CHECK(far.connections == 24);
  CHECK(far.queue_depth == 37);
  CHECK(static_cast<uint64_t>(far.connections) * (far.queue_depth + 1) * far.io_size <= 240ull
                                                                                            << 20);
  CHECK(far.explanation.find("more connections while they help") == std::string::npos);
  const TuningPlan at128 = PlanWrite(Lun(128ms), tgt);
  CHECK(at128.connections == 16);
  CHECK(at128.queue_depth == 27);  // 422 WRITEs in flight
  // On a LAN the recovery term alone asks for more than one connection takes: the per-connection
  // maximum.
  const TuningPlan lan = PlanWrite(Lun(100us), tgt);
  CHECK(lan.connections == 1);
  CHECK(lan.queue_depth == 64);
  CHECK_THAT(at128.explanation, Catch::Contains("WRITEs") && Catch::Contains("2 round trips"));

  // Unsolicited data worth a command: WRITEs of that size, one round trip each.
  NegotiatedParams open = tgt;
  open.initial_r2t = false;
  open.first_burst_length = 256 << 10;
  CHECK(UnsolicitedWriteBytes(open) == 256 << 10);
  const TuningPlan free = PlanWrite(Lun(32ms), open);
  CHECK(free.io_size == 256u << 10);
  CHECK(WriteRoundTrips(free.io_size, open) == 1);
  CHECK(free.queue_depth == 14);  // 2 x 125 MB/s x 232 ms / 256 KiB = 222 over 16 connections

  // No immediate data at all: every byte waits for an R2T.
  NegotiatedParams none = tgt;
  none.immediate_data = false;
  CHECK(UnsolicitedWriteBytes(none) == 0);
  CHECK(PlanWrite(Lun(32ms), none).io_size == 256u << 10);
}

TEST_CASE("autotune: what a WRITE costs, and the target keys that would make it one round trip",
          "[autotune][write]") {
  using wanbackup::initiator::DescribeWriteCost;
  using wanbackup::initiator::KeysForOneRoundTripWrites;
  using wanbackup::initiator::NegotiatedParams;
  NegotiatedParams tgt;  // tgt's defaults, as above
  tgt.initial_r2t = true;
  tgt.immediate_data = true;
  tgt.first_burst_length = 64 << 10;
  tgt.max_burst_length = 256 << 10;
  tgt.target_max_recv_data_segment_length = 8 << 10;
  CHECK(DescribeWriteCost(264 << 10, tgt) ==
        "2 round trips per WRITE (8 KiB unsolicited, bursts of 256 KiB)");
  CHECK(KeysForOneRoundTripWrites(tgt) == "InitialR2T=No and FirstBurstLength=262144");

  // Only the keys still missing are named.
  NegotiatedParams no_r2t = tgt;
  no_r2t.initial_r2t = false;
  no_r2t.first_burst_length = 8 << 10;
  CHECK(KeysForOneRoundTripWrites(no_r2t) == "FirstBurstLength=262144");
  NegotiatedParams big_burst = tgt;
  big_burst.first_burst_length = 256 << 10;
  CHECK(KeysForOneRoundTripWrites(big_burst) == "InitialR2T=No");
  NegotiatedParams open = big_burst;
  open.initial_r2t = false;
  CHECK(KeysForOneRoundTripWrites(open).empty());
  // What the hint names is what WithOneRoundTripKeys changes, and that makes one round trip.
  const NegotiatedParams tuned = wanbackup::initiator::WithOneRoundTripKeys(tgt);
  CHECK_FALSE(tuned.initial_r2t);
  CHECK(tuned.first_burst_length == 256u << 10);
  CHECK(wanbackup::initiator::WriteRoundTrips(256 << 10, tuned) == 1);
  CHECK(KeysForOneRoundTripWrites(tuned).empty());
  CHECK(DescribeWriteCost(256 << 10, open) ==
        "1 round trip per WRITE (256 KiB unsolicited, bursts of 256 KiB)");

  // A login that did not say MaxBurstLength: counted and described with the assumed burst.
  NegotiatedParams unknown = tgt;
  unknown.max_burst_length = 0;
  CHECK(DescribeWriteCost(264 << 10, unknown) ==
        "2 round trips per WRITE (8 KiB unsolicited, bursts of 256 KiB)");
}

TEST_CASE("pacing READs: on a WAN with more than one READ, never on a LAN nor for WRITEs",
          "[autotune]") {
  CHECK(PlanTransfer(Lun(32ms)).pace_reads);
  CHECK(PlanTransfer(Lun(200ms)).pace_reads);
  CHECK_THAT(PlanTransfer(Lun(200ms)).explanation, Catch::Contains("paced"));
  CHECK_FALSE(PlanTransfer(Lun(500us)).pace_reads);  // one connection fills a LAN
  TuningRequest baseline = Lun(32ms);                // the paper's baseline: one READ
  baseline.connections = 1;
  baseline.queue_depth = 1;
  CHECK_FALSE(PlanTransfer(baseline).pace_reads);
  CHECK_FALSE(wanbackup::initiator::PlanWrite(Lun(32ms), {}).pace_reads);
}

TEST_CASE("pacing READs: start-up grows from the targets' first windows by the gain per round",
          "[autotune]") {
  using wanbackup::initiator::kPaceStartupGain;
  using wanbackup::initiator::ReadPacer;
  // What a round delivers was issued the round before: 4 doubles the pace every round trip.
  STATIC_REQUIRE(kPaceStartupGain == 4.0);
  const double window = 120e6;  // budget per round trip
  ReadPacer pacer(1e6);
  CHECK(pacer.rate(window) == 1e6);  // nothing delivered yet
  pacer.OnRound(2e6, false, false, window);
  CHECK(pacer.rate(window) == Approx(8e6));
  // A round that ran out of READs or was still ramping up counts for the rate.
  pacer.OnRound(2.5e6, true, false, window);
  pacer.OnRound(2.5e6, false, true, window);
  CHECK(pacer.starting());
  CHECK(pacer.rate(window) == Approx(10e6));
  // A lower round never lowers the pace.
  pacer.OnRound(1e6, false, false, window);
  CHECK(pacer.rate(window) == Approx(10e6));
  // Once 4 x delivered reaches the window rate, the run is paced at 95 % of it.
  pacer.OnRound(30e6, false, false, window);
  CHECK_FALSE(pacer.starting());
  CHECK(pacer.rate(window) == Approx(0.95 * window));
  // And the window rate moves with the budget (connections added or retired).
  CHECK(pacer.rate(2 * window) == Approx(1.9 * window));
}

TEST_CASE("pacing READs: start-up ends when the delivered rate stops growing", "[autotune]") {
  using wanbackup::initiator::ReadPacer;
  const double window = 120e6;
  ReadPacer pacer(1e6);
  pacer.OnRound(20e6, false, false, window);  // grew: 20 MB/s is the new base
  // Flat rounds that ran out of READs, or while connections ramp up, do not end it.
  for (int i = 0; i < 5; ++i) {
    pacer.OnRound(21e6, true, false, window);
    pacer.OnRound(21e6, false, true, window);
  }
  CHECK(pacer.starting());
  pacer.OnRound(22e6, false, false, window);  // under 25 % more than 20: flat 1
  pacer.OnRound(24e6, false, false, window);  // flat 2
  CHECK(pacer.starting());
  CHECK(pacer.rate(window) == Approx(96e6));
  pacer.OnRound(24.5e6, false, false, window);  // flat 3: the link (or the target) is full
  CHECK_FALSE(pacer.starting());
  CHECK(pacer.rate(window) == Approx(0.95 * window));
}

TEST_CASE("sharing commands: the cap follows a growing window at once, a shrinking one slowly",
          "[autotune]") {
  using wanbackup::initiator::CommandCapRate;
  CHECK(CommandCapRate(10e6, 40e6) == 40e6);  // slow start: the latest sample
  CHECK(CommandCapRate(40e6, 5e6) == 40e6);   // a loss: the smoothed rate, decaying from there
  CHECK(CommandCapRate(0, 0) == 0);           // nothing measured: RateLimitedCommands' limit
}

TEST_CASE("sharing commands: a connection holds at most 1.5 round trips of what it delivers",
          "[autotune]") {
  using wanbackup::initiator::RateLimitedCommands;
  // 7.5 MB/s (a sixteenth of the link) at 300 ms: 2.25 MB, x 1.5 = 12.9 READs of 256 KiB.
  CHECK(RateLimitedCommands(16, 7.5e6, 300ms, 256 << 10) == 13);
  // A window that collapsed after a loss: fewer, but never fewer than 2.
  CHECK(RateLimitedCommands(16, 1e6, 300ms, 256 << 10) == 2);
  CHECK(RateLimitedCommands(16, 0.1e6, 300ms, 256 << 10) == 2);
  // Never more than the shared limit, and a rate not measured yet leaves it as it is.
  CHECK(RateLimitedCommands(16, 100e6, 300ms, 256 << 10) == 16);
  CHECK(RateLimitedCommands(16, 0, 300ms, 256 << 10) == 16);
  CHECK(RateLimitedCommands(1, 0.1e6, 300ms, 256 << 10) == 1);
}
