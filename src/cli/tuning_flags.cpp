#include "cli/tuning_flags.h"

#include <CLI/CLI.hpp>

#include "common/units.h"

namespace wanbackup::cli {

void AddTuningFlags(CLI::App* command, TuningFlags* flags) {
  const char* group = "Tuning (defaults: autotune, see below)";
  command
      ->add_option("--connections", flags->connections,
                   "iSCSI connections (sessions), 1-32; default: from the RTT (1 on a LAN), "
                   "then more while they raise throughput")
      ->check(CLI::Range(1, initiator::kMaxLongRttConnections))
      ->group(group);
  command
      ->add_option("--queue-depth", flags->queue_depth,
                   "READs (WRITEs to a LUN) in flight per connection on average (C x N in "
                   "all; a fast connection takes up to 2 x N), 1-64; default: enough that all "
                   "connections together hold 125 MB/s x RTT, at least 2 and 1M / --io-size, at "
                   "most 4M / --io-size (4 up to about 64 ms one-way; WRITEs: see below)")
      ->check(CLI::Range(1, initiator::kMaxQueueDepth))
      ->group(group);
  command
      ->add_option("--io-size", flags->io_size,
                   "bytes per READ (or WRITE), a multiple of the block size up to 64M; default "
                   "256K (WRITEs: see below); capped by the LUN's maximum transfer length")
      ->group(group);
  command
      ->add_option("--max-memory", flags->max_memory,
                   "cap on buffer memory (data in flight and waiting to be written)")
      ->capture_default_str()
      ->group(group);
  command
      ->add_flag("--paper-baseline", flags->paper_baseline,
                 "behave like the OS initiator in the paper: 1 connection, 1 READ of 128 KiB "
                 "at a time (for comparison)")
      ->group(group);
  command
      ->add_option("--retry-timeout", flags->retry_timeout,
                   "give up when no data arrives for this long despite retries and reconnects")
      ->capture_default_str()
      ->group(group);
  command
      ->add_option("--congestion-control", flags->congestion_control,
                   "TCP congestion control of wanbackup's connections, which governs what it "
                   "sends: the data of WRITEs to a LUN (READ data is sent by the target); "
                   "default: the host's (net.ipv4.tcp_congestion_control, usually cubic). "
                   "bbr carried 10-30% more WRITEs at 16-64 ms one-way on a lossy 1 Gbit/s "
                   "link, but kept its queue overfull (15-19% of segments dropped): use it on a "
                   "link that replication has to itself")
      ->type_name("NAME")
      ->group(group);
}

void AddLimitRateFlag(CLI::App* command, TuningFlags* flags) {
  command
      ->add_option("--limit-rate", flags->limit_rate,
                   "hold the average transfer to RATE bytes per second over all connections "
                   "together: 20M (= 20 MiB/s), 20MB/s (SI), 160mbit; default unlimited")
      ->type_name("RATE")
      ->group("Tuning (defaults: autotune, see below)");
}

Result<uint64_t> LimitRate(const TuningFlags& flags) {
  if (flags.limit_rate.empty()) return uint64_t{0};
  Result<uint64_t> rate = ParseByteRate(flags.limit_rate);
  if (!rate.ok()) return rate.status().WithContext("--limit-rate");
  if (*rate != 0 && *rate < 4096) {
    return Status::InvalidArgument("--limit-rate must be at least 4K per second (or unlimited)");
  }
  return rate;
}

std::string AutotuneHelp() {
  return "\nAUTOTUNE:\n"
         "  wanbackup measures the round trip (RTT) and keeps N READs of B bytes in flight on\n"
         "  each of C connections, so the link never waits for a command. C is 1 below 2 ms\n"
         "  RTT, else what 1 Gbit/s needs at that RTT when a connection sharing a busy link\n"
         "  carries 0.5 MB per round trip: 125 MB/s x RTT / 0.5 MB, at least 4, at most 16\n"
         "  (8 at 32 ms RTT); while reading, C grows by half as long as each step raises\n"
         "  throughput by 20% or more. From about 130 ms one-way the most is higher: Linux\n"
         "  gives a connection a receive window of at most 3 MiB (half of tcp_rmem's 6 MiB),\n"
         "  so there C is 1.5 x 125 MB/s x RTT / 3 MiB (18 at 150 ms one-way, 24 at\n"
         "  200 ms), at most 32. Each connection: READs of B = 256 KiB, N of them, so\n"
         "  that the C connections together hold what 1 Gbit/s carries in one round trip:\n"
         "  N = 125 MB/s x RTT / (C x B), at least 1 MiB / B (and 2), at most 4 MiB / B (4\n"
         "  up to about 64 ms one-way). More in flight only queues in the target, and a\n"
         "  target that spins on a full socket (tgt before 1.0.89) then carries less. The\n"
         "  same bytes in smaller READs reach a WAN router's queue in smaller bursts, so\n"
         "  fewer are dropped: 256 KiB READs carried 3-12% more than 512 KiB at 16-64 ms\n"
         "  one-way. A new connection's READs start at 32 KiB and double per completion up\n"
         "  to B. The C x N READs are shared by speed: each goes to the connection that\n"
         "  would finish it first (by what it delivered lately), at least 1 and at most\n"
         "  2 x N (and 4 MiB) per connection.\n"
         "  Completions are collected at most every 1/8 of the time the other READs in\n"
         "  flight keep the link busy (at most 1 ms; never with one READ in flight), so the\n"
         "  reader does not wake for every few packets.\n"
         "  C x (N+1) x B stays within --max-memory (N shrinks first, then C, then B). Any\n"
         "  value given on the command line is used as is.\n";
}

std::string WriteTuneHelp() {
  return "\nWRITING TO A LUN:\n"
         "  A WRITE sends with its command only the immediate data (8 KiB against tgt's\n"
         "  defaults); the rest waits for the target's R2T, one burst (256 KiB) per round trip.\n"
         "  So WRITEs are the immediate data plus one burst (264 KiB, 2 round trips), or the\n"
         "  unsolicited size (1 round trip) when the target allows InitialR2T=No with at least\n"
         "  64 KiB, and C connections together keep 2 x 125 MB/s x (round trips x RTT + 0.2 s)\n"
         "  of them in flight: the 0.2 s covers a WRITE whose last segment was lost on a full\n"
         "  link and waits for TCP's retransmission timeout. C is 1 below 2 ms RTT, else the\n"
         "  most a read may use (16, more from about 130 ms one-way): the data goes out on our\n"
         "  own TCP connections, and the more of them share a full router queue, the less one\n"
         "  loss costs (at 16 ms one-way 16 connections restored 1 GiB at 114 MB/s where 9 did\n"
         "  107). At 32 ms RTT that is 16 x 16 WRITEs of 264 KiB (66 MiB), at 128 ms 16 x 27\n"
         "  (111 MiB); within --max-memory. --queue-depth and --io-size then count WRITEs.\n"
         "  `wanbackup probe URL` shows what a WRITE costs on that target (docs/operations.md,\n"
         "  \"Writing to a LUN across a WAN\", has the target's side).\n";
}

Status ApplyTuningFlags(const TuningFlags& flags, initiator::IscsiSourceOptions* options) {
  initiator::TuningRequest& t = options->tuning;
  if (flags.paper_baseline) {
    if (flags.connections != 0 || flags.queue_depth != 0 || !flags.io_size.empty()) {
      return Status::InvalidArgument(
          "--paper-baseline sets --connections, --queue-depth and --io-size itself");
    }
    t.connections = 1;
    t.queue_depth = 1;
    t.io_size = 128 << 10;
  } else {
    t.connections = flags.connections;
    t.queue_depth = flags.queue_depth;
    if (!flags.io_size.empty()) {
      Result<uint64_t> size = ParseSize(flags.io_size);
      if (!size.ok()) return size.status().WithContext("--io-size");
      if (*size < 512 || *size > initiator::kMaxIoSize || *size % 512 != 0) {
        return Status::InvalidArgument("--io-size must be a multiple of 512 from 512 to 64M");
      }
      t.io_size = *size;
    }
  }
  Result<uint64_t> memory = ParseSize(flags.max_memory);
  if (!memory.ok()) return memory.status().WithContext("--max-memory");
  if (*memory < (1 << 20)) return Status::InvalidArgument("--max-memory must be at least 1M");
  if (t.io_size != 0 && *memory < t.io_size) {
    return Status::InvalidArgument("--max-memory must hold at least one READ (--io-size)");
  }
  t.max_memory = *memory;
  Result<std::chrono::nanoseconds> retry = ParseDuration(flags.retry_timeout, "s");
  if (!retry.ok()) return retry.status().WithContext("--retry-timeout");
  if (retry->count() <= 0) return Status::InvalidArgument("--retry-timeout must be positive");
  options->retry_timeout = std::chrono::ceil<std::chrono::milliseconds>(*retry);
  if (!flags.congestion_control.empty()) {
    WB_RETURN_IF_ERROR(initiator::CheckCongestionControl(flags.congestion_control)
                           .WithContext("--congestion-control"));
  }
  options->connection.congestion_control = flags.congestion_control;
  return Status::Ok();
}

}  // namespace wanbackup::cli
