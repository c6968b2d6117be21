// Autotune: how many connections (C), commands per connection (N) and bytes per READ (B) keep a
// long link busy, within a memory cap. Pure logic; thread-compatible.
//
// The rule (docs/performance.md has the model and the measurements):
//   - Every connection: READs of B = 256 KiB, N of them, so that the C connections together
//     keep one bandwidth-delay product of a 1 Gbit/s link outstanding (125 MB/s · RTT), at
//     least 1 MiB per connection (N = 4) and no more than the target's socket takes (4 MiB,
//     tgt's tcp_wmem maximum): N = 4 up to about 64 ms one-way, 6 at 100 ms with 16
//     connections. More in flight only queues in the target: tgt 1.0.85 (Debian 12) then burns
//     CPU (10-20 s per 2 GiB read, against about 2 s) and carries less. Why 256 KiB and not
//     512: the same bytes in smaller READs reach the emulated link's 2 MiB queue in smaller
//     bursts (a READ that finds its connection's window open leaves the target at once), and
//     each is one Data-In PDU of libiscsi's 256 KiB, which tgt writes in one go. 4 GiB copies
//     from a /dev/shm LUN through the emulated 1 Gbit/s link, CUBIC senders, 2026-11-26
//     (docs/performance/log/2026-11-26-read-size.md): at 64 ms one-way 16 x 4 x 256 KiB
//     carried 115.1, 113.3, 113.5 MB/s against 83.1-110.2 (median 101.8, 9 copies) for
//     16 x 2 x 512 KiB; at 32 ms 116.6 against 104.5, at 16 ms 119.4 against 115.8; equal at
//     0 ms (120.6) and at 100 ms (94.5-95.5 against 84.9-98.5). One TCP connection from the
//     target carries about W = 2.5 MB per round trip alone (kWindowBytesPerRtt).
//   - The C x N READs are shared by speed, not N to each (ChooseConnection, below): at 16 ms
//     one-way the fastest of 9 CUBIC connections had a window of 1 MB and sat idle waiting
//     for commands while others had 150 KB; sharing carried 6/6 copies more (median 95.4
//     against 89.3 MB/s, docs/performance.md).
//   - The reader services its sockets at most once per ServiceInterval (below): an eighth of
//     what the other READs in flight cover, at most 1 ms, so a wake-up is not a few packets.
//   - B never exceeds the LUN's Block Limits maximum transfer nor the memory cap. A new
//     connection's READs start at 32 KiB and double per completion up to B.
//   - C starts at 1 when the RTT is under 2 ms (one connection fills the link; more cost CPU),
//     else at what a 1 Gbit/s link needs when each connection carries only Ws = 0.5 MB per
//     round trip — what one tgt connection was measured to carry once several share a full,
//     lossy link (the 2.5 MB above is its ceiling alone):
//     C = ceil(125 MB/s · RTT / Ws), at least 4, at most 16 (8 at 32 ms RTT, 16 from 64 ms),
//     or more from about 130 ms one-way, where 16 receive windows do not hold the round trip
//     (MaxConnections, below: 18 at 150 ms, 24 at 200 ms).
//     While reading, ConnectionScaler adds half again as many as long as each step raises
//     throughput by 20 % or more (measured over at least 1 s or 8 RTT, after the start-up
//     ramp); a smaller bar let the ramp's own growth pass for a gain and added connections
//     that cost throughput.
//   - On a WAN, READs are paced: issued evenly at 95 % of the window's rate (C x N x B per round
//     trip) after a start-up from the targets' first windows, and no connection holds more than
//     1.5 round trips of what it delivers (ReadPacer and RateLimitedCommands, below).
//   - Each connection needs (N + 1)·B of buffers (one waiting spare). If C·(N+1)·B exceeds the
//     buffer budget (--max-memory less what the program itself needs), N shrinks first (to 1),
//     then C, then B (to 256 KiB).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>

#include "initiator/connection_options.h"

namespace wanbackup::initiator {

inline constexpr uint64_t kDefaultIoSize = 256 << 10;
inline constexpr uint64_t kMinBytesPerConnection = 1 << 20;  // N >= this / B, and >= 2
inline constexpr uint64_t kOutstandingBytesPerConnection = 4 << 20;
inline constexpr uint64_t kMinIoSize = 256 << 10;
inline constexpr uint64_t kMaxIoSize = 64 << 20;
inline constexpr double kWindowBytesPerRtt = 2.5e6;
inline constexpr double kSharedWindowBytesPerRtt = 0.5e6;
inline constexpr double kShortRttSeconds = 0.002;
inline constexpr int kMinWanConnections = 4;
inline constexpr double kAssumedLinkBytesPerSecond = 125e6;
inline constexpr int kMaxConnections = 16;
// Beyond 16 only where the round trip needs more: Linux offers a connection a receive window of
// at most half its net.ipv4.tcp_rmem maximum (6 MiB by default, so 3 MiB), and a connection
// carries no more than that per round trip whatever we keep outstanding on it. 16 of them hold
// 50 MB, the whole bandwidth-delay product of 1 Gbit/s at 200 ms one-way, with no room for the
// windows that a loss has just cut: a 16 GiB copy there carried 114.5 MB/s steady with 16
// connections and 119.4 with 24 (docs/performance.md, "Steady state at 150 and 200 ms"). So
// the cap is kLongRttWindowMargin x 125 MB/s x RTT in windows of kReceiveWindowBytes, at
// least kMaxConnections and at most kMaxLongRttConnections: 16 up to about 130 ms one-way, 18
// at 150 ms, 24 at 200 ms. MaxConnections(rtt) below.
inline constexpr uint64_t kReceiveWindowBytes = 3 << 20;
inline constexpr double kLongRttWindowMargin = 1.5;
inline constexpr int kMaxLongRttConnections = 32;
inline constexpr int kMaxQueueDepth = 64;
inline constexpr uint64_t kDefaultMaxMemory = 256ull << 20;

// The most connections autotune opens at `rtt` (see kMaxConnections): 16, or more from about
// 130 ms one-way, up to kMaxLongRttConnections.
int MaxConnections(std::chrono::nanoseconds rtt);

// What of a --max-memory budget may go to data buffers: the rest is left for the program itself
// (code, libraries, queues), so that its whole resident size stays within the budget.
uint64_t BufferBudget(uint64_t max_memory);

struct TuningRequest {
  std::chrono::nanoseconds rtt{0};
  uint32_t block_size = 512;
  uint64_t lun_size = 0;
  uint64_t max_transfer_bytes = 0;  // from Block Limits; 0 = no limit
  uint64_t max_memory = kDefaultMaxMemory;
  int connections = 0;   // 0 = choose
  int queue_depth = 0;   // 0 = choose
  uint64_t io_size = 0;  // 0 = choose
};

struct TuningPlan {
  int connections = 1;
  int queue_depth = 1;
  uint64_t io_size = kDefaultIoSize;
  bool adapt_connections = false;  // ConnectionScaler may add connections (C was not given)
  int max_connections = 1;         // what the memory cap allows at this N and B
  bool pace_reads = false;         // ReadPacer (below): on a WAN, with more than one READ
  std::string explanation;         // one line: why these values
};

// Never fails: user values are clamped to what the LUN and the memory cap allow (the
// explanation says so when that happens).
TuningPlan PlanTransfer(const TuningRequest& request);

// WRITEs (PlanWrite). A READ costs one round trip whatever its size (the target sends all of its
// Data-In at once), but a WRITE's data waits for the target's leave:
//   - up to UnsolicitedWriteBytes go with the command (immediate data, within FirstBurstLength
//     and the target's MaxRecvDataSegmentLength; with InitialR2T=No, unsolicited Data-Out up to
//     FirstBurstLength);
//   - every burst of up to MaxBurstLength after that waits for an R2T, and libiscsi 1.19 allows
//     one outstanding R2T per command (MaxOutstandingR2T=1): one more round trip per burst.
// So a WRITE of B bytes costs R = 1 + ceil((B - unsolicited) / MaxBurstLength) round trips, and
// with K WRITEs in flight throughput ≈ K x B / (R x RTT) ≈ K x MaxBurstLength / RTT for large B.
// Memory in flight is K x B = bandwidth x RTT x R: the fewer round trips per WRITE the better,
// so PlanWrite sends WRITEs of the unsolicited size when that is at least kMinUnsolicitedWrite
// (one round trip each), else of unsolicited + one burst (two round trips; 264 KiB against
// tgt's defaults: 8 KiB immediate, 256 KiB bursts), and keeps
//   K = kWriteMargin x assumed link rate x (R x RTT + kWriteRecoverySeconds) / B
// of them in flight over C connections, N = K / C each (at least 2, at most kMaxQueueDepth; tgt
// takes 128 per session). C is 1 on a LAN, else MaxConnections(RTT) (16 up to about 130 ms
// one-way): more than a read's count, because the data is what our own TCP sends, and behind a
// full drop-tail queue the more flows share it, the less one loss cuts of the whole. Restores
// of 1 GiB through the emulated 1 Gbit/s link, interleaved, 2026-11-29: at 16 ms one-way 9
// connections (a read's count) carried 104.4-113.7 MB/s (median 107.3, 5 runs) and 16 carried
// 114.1-115.6 (114.4) beside iperf3 -P8's 117.2; at 8 ms 4 carried 111.0-117.3 and 16
// 116.1-117.6 beside 119.2; 4 and 6 at 16 ms were worse (86.9-109.6). K stays what it is; only
// the spare buffer per connection adds, and more connections than a read's are taken only
// where those spares fit the memory cap (else a read's count, as before). A --queue-depth
// given keeps a read's count too (it is per connection). Why more than rate x R x RTT: a WRITE
// holds its buffer until the target's status, also while its data waits its turn on its connection
// and while that connection recovers a lost segment. Behind a 2 MiB queue 9-16 connections lose
// 5-16 % of their segments there (measured with bbr senders; iperf3 -P8 loses as many), and a
// WRITE whose tail was lost waits for a retransmission timeout, at least 200 ms on Linux
// (TCP_RTO_MIN), whatever the RTT. Measured against tgt through the emulated 1 Gbit/s link, 1 GiB
// from /dev/shm (docs/performance.md, "Writing a LUN"): at 16 ms one-way 9 x 7 WRITEs carried 83-86
// MB/s, 9 x 14 98-103 and 9 x 28 103-107 beside iperf3 -P8's 112-116; at 64 ms 16 x 15 carried
// 66-72 and 16 x 30 68-83 beside 78-83; at 0 ms 1 x 2 carried 81 and 1 x 64 107 beside 119. This
// rule gave 9 x 28 at 32.3 ms RTT with a read's connections; now 16 x 16, and 16 x 27 and 1 x 64 at
// 128.3 and 0.1 ms.
inline constexpr double kWriteMargin = 2.0;
inline constexpr double kWriteRecoverySeconds = 0.2;
inline constexpr uint64_t kMinUnsolicitedWrite = 64 << 10;
inline constexpr uint32_t kAssumedMaxBurst = 256 << 10;  // when the login did not say
uint64_t UnsolicitedWriteBytes(const NegotiatedParams& negotiated);
int WriteRoundTrips(uint64_t write_bytes, const NegotiatedParams& negotiated);
// "2 round trips per WRITE (8 KiB unsolicited, bursts of 256 KiB)" for WRITEs of `write_bytes`.
std::string DescribeWriteCost(uint64_t write_bytes, const NegotiatedParams& negotiated);
// The login as it would be with the keys that let WRITEs go in one round trip: InitialR2T=No
// and FirstBurstLength at least the initiator's burst (kInitiatorBurstLength).
NegotiatedParams WithOneRoundTripKeys(const NegotiatedParams& negotiated);
// Those keys, as "InitialR2T=No and FirstBurstLength=262144" (only those not already so);
// empty when nothing would change.
std::string KeysForOneRoundTripWrites(const NegotiatedParams& negotiated);
// Like PlanTransfer, for WRITEs under `negotiated` (user values still win).
TuningPlan PlanWrite(const TuningRequest& request, const NegotiatedParams& negotiated);

// Adds connections while they help: half again as many each step, as long as the previous step
// raised throughput by `min_gain`, and only while the connections are at their own plateau —
// each carrying at least half of `per_connection_ceiling` (what one connection can carry alone,
// W / RTT). Connections well below that are not what limits the transfer (the link or the
// target is), and more of them only add loss. Feed it the throughput of each measurement window
// during which every connection was up, past its start-up ramp, and had work queued.
inline constexpr double kPlateauShare = 0.5;
// A step that lowered throughput by more than this share is undone: the scaler goes back to the
// count that carried the most, and the engine retires the extra connections once they are idle.
// (Smaller losses are noise on a shared link: the connections stay.)
inline constexpr double kStepLossToUndo = 0.10;

class ConnectionScaler {
 public:
  ConnectionScaler(int start, int max, double min_gain = 1.20);
  // Returns how many connections to have now: more while steps pay, the best count so far when
  // the last step cost throughput (kStepLossToUndo), else `connections`. A ceiling of 0: unknown.
  int OnMeasurement(int connections, double bytes_per_second, double per_connection_ceiling = 0);
  bool settled() const { return settled_; }
  double best_rate() const { return best_rate_; }

 private:
  int max_;
  double min_gain_;
  double best_rate_ = 0;
  int best_connections_ = 0;  // the count that carried best_rate_
  bool settled_ = false;
};

// Sharing the commands among the connections. C x N READs are in flight in all, and each goes to
// the connection that would finish it first — (its outstanding commands + 1) / its delivery rate —
// rather than N to each: TCP gives the connections of one link very different windows (one
// carries a fifth of what another does after a loss), and a fixed N per connection leaves the fast
// ones idle while the slow ones queue theirs in the target. An idle connection is served first
// (its window stays open and its rate known); none takes more than PerConnectionLimit, nor, when
// READs are paced, more than RateLimitedCommands (the engine then marks it not usable).
struct ConnectionLoad {
  bool usable = false;  // logged in, not failing, below its own limit
  int outstanding = 0;  // commands in flight on it
  double rate = 0;      // bytes/s it delivered lately; 0 = not known yet (the average is assumed)
};

// Twice N, but never more than the target's socket takes (kOutstandingBytesPerConnection), nor
// less than N.
int PerConnectionLimit(int queue_depth, uint64_t io_size);

// And never more than kRateWindows x what the connection delivers in `rtt` (at least 2
// commands; a rate of 0, not measured yet, leaves `limit` as it is). A connection whose window
// collapsed after a loss otherwise keeps its share of READs, which fill its socket in the
// target; tgt 1.0.85 then spins on that socket and every other connection waits: at 150 ms
// one-way no READ finished in less than 3.8 s for over a second, tgtd at 20 CPU s per 4 GiB
// instead of 8-10 (docs/performance.md, "Pacing READs"). Linux sizes a send buffer at about
// twice the window, so 1.5 windows of READs fit. The engine passes the login's RTT, or the
// quickest READ so far when that is longer (a target slower to answer than the link is long).
inline constexpr double kRateWindows = 1.5;
int RateLimitedCommands(int limit, double bytes_per_second, std::chrono::nanoseconds rtt,
                        uint64_t io_size);

// The rate RateLimitedCommands is given for a connection: its smoothed rate, or its latest
// sample when that is higher. A collapsed window shows as a low sample and the smoothed rate
// decays from there, as it always did; but a window that grows (slow start doubles it every
// round trip) is followed at once. With the smoothed rate alone (a quarter weight per two round
// trips) the cap grew about 6 % per round trip after start-up, and at 150 ms one-way a 1 GiB
// copy took 5 s more to reach the line (docs/performance/log/2026-11-29-startup-and-target.md).
double CommandCapRate(double smoothed, double latest_sample);

// The index of the connection for the next command, or -1 when `in_flight` has reached `budget`
// or no usable connection has room.
int ChooseConnection(std::span<const ConnectionLoad> connections, int in_flight, int budget,
                     int per_connection_limit);

// Coalescing completions. Serviced as soon as anything arrives, the reader woke for every few
// packets: at 16 ms one-way a 2 GiB copy made ~350,000 poll()s and readv()s of ~6 KB and spent
// 8 s of CPU, on a machine whose two cores also run the emulated link and the target. Servicing
// the sockets at most once per ServiceInterval lets each wake-up take what arrived meanwhile (the
// kernel keeps receiving and acknowledging; only our copy-out waits): 1.8-3 s of CPU, and the
// copy went from 91-100 to 110-116 MB/s (docs/performance.md). A completion noticed that much
// later delays the READ that replaces it, so the pause is an eighth of what the other READs in
// flight keep the link busy for — (budget - 1) x B at the delivered rate — and at most
// kMaxServiceInterval. With one READ in flight (the paper's modes) or no rate measured yet, it
// is 0: nothing would hide the delay.
inline constexpr std::chrono::microseconds kMaxServiceInterval{1000};
std::chrono::nanoseconds ServiceInterval(int budget, uint64_t io_size, double bytes_per_second);

// Pacing READs. The initiator asks for every byte the target sends, so the rate at which it
// issues READs is the rate at which data enters the network. Issued as fast as completions free
// the budget, READs arrive at the target in bunches, and each leaves as one burst at the speed of
// the target's interface: behind a 1 Gbit/s link with a 2 MiB queue, 16 CUBIC connections lost
// 0.1-0.35 % of their segments there at 64-200 ms one-way, and each loss halves a window that
// takes seconds to grow back at such round trips. So READs are issued evenly, never faster than
// the window rate — the budget (C x N x B, one bandwidth-delay product of the assumed link) per
// round trip — times kPaceWindowShare, at most one READ ahead (docs/performance.md, "Pacing
// READs"):
//   - start-up: kPaceStartupGain x the highest rate delivered in a round so far, from what the
//     target's connections can send in their first round trip (kInitialWindowBytes each): the
//     target's TCP slow start grows its windows at that pace without a backlog of READs, and a
//     backlog is what makes slow start send in bursts of twice the link's rate. It ends when
//     that reaches the window rate, or when the delivered rate grew by less than
//     kPaceStartupGrowth in kPaceStartupRounds rounds (rounds while connections still log in or
//     ramp up, or that ran out of READs to issue, do not count);
//   - then kPaceWindowShare x the window rate. That is not an estimate of the link: the window
//     already is the plan's (autotune.h: a 1 Gbit/s link), and pacing only spreads it evenly.
// A round is one round trip, at least kPaceMinRound, so that a sample spans many READs.
inline constexpr double kPaceWindowShare = 0.95;
// What a round delivers was issued the round before, so a gain G grows the pace by G every
// second round: 4 doubles it every round trip, as TCP's slow start doubles a window, and never
// faster than the target's windows deliver. 2 (2026-11-29, until that evening) doubled it every
// second round trip: 4 GiB copies took 0.5-1.1 s longer at 100-200 ms one-way, a 1 GiB copy at 64
// ms 0.3 s, with no retransmission either way at 64-200 ms (docs/performance.md, "Start-up"). 1.5
// (until 2026-11-29) took 2-3 s longer than 2 to reach the line at 64-150 ms (the log above).
inline constexpr double kPaceStartupGain = 4.0;
inline constexpr double kInitialWindowBytes = 10 * 1448;  // Linux's 10 segments (RFC 6928)
inline constexpr double kPaceStartupGrowth = 1.25;
inline constexpr int kPaceStartupRounds = 3;
inline constexpr std::chrono::milliseconds kPaceMinRound{50};

class ReadPacer {
 public:
  // `initial_rate`: the start-up pace before anything was delivered (bytes/s).
  explicit ReadPacer(double initial_rate) : initial_rate_(initial_rate) {}
  // At the end of each round: the bytes per second it delivered; `app_limited`: it ran out of
  // READs to issue; `warming`: connections were still logging in or ramping up.
  void OnRound(double delivered, bool app_limited, bool warming, double window_rate);
  // Bytes per second to issue READs at, under `window_rate` (budget bytes per round trip).
  // Above 0 whenever `initial_rate` and `window_rate` are: the engine's token bucket relies on it.
  double rate(double window_rate) const;
  bool starting() const { return starting_; }

 private:
  double initial_rate_;
  bool starting_ = true;
  double highest_ = 0;      // the most delivered in one round
  double growth_base_ = 0;  // highest_ when it last grew by kPaceStartupGrowth
  int flat_rounds_ = 0;
};

}  // namespace wanbackup::initiator
