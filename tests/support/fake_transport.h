// FakeTransport: a scripted iSCSI target behind a scripted network, on a virtual clock, for
// testing the engines' logic (initiator/internal/transport.h) in milliseconds without root.
//
// The model: every channel sends its READs' data one after another at its own rate, all of it
// passes one link (a FIFO whose rate may depend on how many channels are open), and each READ is
// answered one round trip after its last byte leaves — so a channel with N READs outstanding
// carries at most N READs per round trip, as a window-limited TCP connection does. WRITEs send
// their data the same way and are answered as iSCSI with InitialR2T=Yes answers them: one round
// trip for the command and its unsolicited data, one more per burst of `max_burst_bytes` after
// it (one R2T outstanding). WRITE SAME and SYNCHRONIZE CACHE carry no data: one round trip. Logins
// take a few round trips. Hooks decide, per command and per login, what goes wrong. The LUN's
// content is a function of the offset (ContentAt), so any size costs no memory — until the first
// WRITE, which makes the fake keep the whole LUN in memory (keep written LUNs small); a WRITE
// lands when its GOOD status is delivered, so one lost with its connection never lands.
//
// Time jumps from event to event while anything is in flight; with nothing in flight it waits a
// real millisecond for the consumer (a Wake) before moving on to the engine's deadline, so
// back-offs and the no-progress clock still run. Hooks run under the fake's lock: they must not
// call its accessors. Thread-safe like a real transport: Wake() from any thread,
// everything else from the engine's I/O thread; the accessors from any thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "initiator/internal/transport.h"

namespace wanbackup::testing {

namespace wbi = wanbackup::initiator::internal;

// What the target does with one READ.
struct FakeAnswer {
  enum class Kind {
    kData,         // the data, GOOD
    kShort,        // GOOD, but only the first half of the data (a residual underflow)
    kStatus,       // `status` with `sense_key`, no data
    kHang,         // never answers; the initiator's command timeout ends it (SCSI TIMEOUT)
    kLoseChannel,  // the connection resets half a round trip later; nothing answers on it
  };
  Kind kind = Kind::kData;
  int status = wbi::scsi::kGood;
  int sense_key = 0;
};

// One command as the target sees it.
struct FakeCommand {
  size_t channel = 0;
  int login = 0;  // how many logins this channel has had, counting this session's (1 = first)
  int nth = 0;    // commands on this session so far, counting this one (1 = first)
  uint64_t lba = 0;
  uint32_t bytes = 0;
  wbi::BlockOp op = wbi::BlockOp::kRead;
  bool fua = false;
  bool unmap = false;
  bool legacy = false;  // SYNCHRONIZE CACHE(10)
};
using FakeRead = FakeCommand;

struct FakeLinkOptions {
  uint64_t lun_bytes = 64 << 20;
  uint32_t block_size = 512;
  std::chrono::nanoseconds rtt = std::chrono::milliseconds(20);
  double channel_bytes_per_second = 50e6;  // one connection alone
  // The link's capacity with `n` channels open; null: unlimited.
  std::function<double(int n)> link_bytes_per_second;
  // A channel carries its data `slowdown(channel)` times slower; null: all 1.
  std::function<double(size_t channel)> slowdown;
  int login_round_trips = 3;
  // WRITE: data sent with the command (immediate/unsolicited), and per R2T burst after it.
  uint32_t unsolicited_bytes = 8192;
  uint32_t max_burst_bytes = 262144;
  std::chrono::nanoseconds command_timeout = std::chrono::seconds(30);
};

class FakeTransport final : public wbi::Transport {
 public:
  // Channel 0 starts open (the engine's first connection, as IscsiSource::Open leaves it).
  explicit FakeTransport(FakeLinkOptions options);

  // Scripts. Set before the engine starts.
  std::function<FakeAnswer(const FakeRead&)> on_read;
  // WRITE, WRITE SAME and SYNCHRONIZE CACHE; null: all succeed.
  std::function<FakeAnswer(const FakeCommand&)> on_write;
  // The status of login number `attempt` (1 = first) of `channel`; null: always OK.
  std::function<Status(size_t channel, int attempt)> on_login;

  // The byte the LUN holds at `offset`.
  static uint8_t ContentAt(uint64_t offset);
  // Fills `out` with the LUN's bytes at [offset, offset + size).
  static void FillContent(uint64_t offset, uint8_t* out, size_t size);

  // Observations (any thread).
  int logins() const;            // every login attempt, the first session's included
  int reconnect_logins() const;  // attempts that had to prove the same device
  int closes() const;            // connections the engine tore down while they were open
  int reads_past_end() const;    // READs that reached beyond the LUN (answered ILLEGAL REQUEST)
  // When each READ was sent (virtual time) and its bytes, in order.
  std::vector<std::pair<Clock::time_point, uint32_t>> read_log() const;
  uint64_t bytes_on(size_t channel) const;  // data delivered by one channel
  int max_open_channels() const;
  int open_channels() const;
  std::chrono::nanoseconds elapsed() const;  // virtual time since construction
  // The LUN's content now (what READs would return).
  std::vector<uint8_t> Disk() const;
  uint64_t bytes_written() const;  // WRITE data that landed (the wire may have carried more)
  uint64_t bytes_zeroed() const;   // by WRITE SAME
  int write_sames() const;         // WRITE SAMEs that landed
  int unmaps() const;              // of them, with the UNMAP bit
  int syncs() const;               // SYNCHRONIZE CACHEs answered GOOD
  int writes_after_sync() const;   // WRITEs/WRITE SAMEs that landed after the last good SYNC

  // Transport
  Clock::time_point Now() const override;
  void Connect(size_t index, bool reconnect) override;
  Status Read(size_t index, const wbi::BlockCommand& command) override;
  Status Write(size_t index, const wbi::BlockCommand& command) override;
  Status WriteZeros(size_t index, const wbi::BlockCommand& command) override;
  Status SynchronizeCache(size_t index, const wbi::BlockCommand& command) override;
  void Close(size_t index) override;
  void Poll(Clock::time_point deadline, wbi::TransportEvents* events) override;
  void SleepUntil(Clock::time_point until) override;
  void Wake() override;

 private:
  struct Channel {
    bool open = false;
    uint64_t generation = 0;  // bumped by Close and each login: older events are void
    int logins = 0;
    int reads = 0;
    Clock::time_point busy_until{};
    uint64_t bytes = 0;
  };
  struct Event {
    enum class Kind { kDone, kConnected, kLost };
    Kind kind = Kind::kDone;
    size_t channel = 0;
    uint64_t generation = 0;
    wbi::CommandDone done;
    wbi::BlockCommand command;  // kDone with data: where it goes
    uint32_t data_bytes = 0;    // how much of it to fill
    Status status;              // kConnected, kLost
  };

  Channel& ChannelAt(size_t channel);  // REQUIRES: mu_ held
  int OpenCount() const;               // REQUIRES: mu_ held
  double RateFor(size_t channel) const;
  // When `bytes` sent now on `channel` will have left: after what the channel and the link are
  // already sending, at the slower of their rates. REQUIRES: mu_ held.
  Clock::time_point Send(Channel& channel, size_t index, uint32_t bytes);
  void Schedule(Clock::time_point when, Event event);
  // Answers `command` as `answer` says; `data_at` is when a data answer is due. REQUIRES: mu_.
  void Answer(Channel& channel, size_t index, const wbi::BlockCommand& command, FakeAnswer answer,
              Clock::time_point data_at);
  Status Command(size_t index, const wbi::BlockCommand& command);
  void Deliver(Event& event, wbi::TransportEvents* events);
  void Land(const wbi::BlockCommand& command);  // a WRITE's effect on the LUN. REQUIRES: mu_.

  const FakeLinkOptions options_;
  const Clock::time_point start_;
  mutable std::mutex mu_;
  std::condition_variable wake_cv_;
  bool woken_ = false;
  Clock::time_point now_;
  Clock::time_point link_busy_until_{};
  std::vector<Channel> channels_;
  std::multimap<Clock::time_point, Event> events_;
  int logins_ = 0, reconnect_logins_ = 0, closes_ = 0, reads_past_end_ = 0, max_open_ = 1;
  std::vector<std::pair<Clock::time_point, uint32_t>> read_log_;
  std::vector<uint8_t> disk_;  // empty until the first WRITE lands
  uint64_t bytes_written_ = 0, bytes_zeroed_ = 0;
  int write_sames_ = 0, unmaps_ = 0, syncs_ = 0, writes_after_sync_ = 0;
};

}  // namespace wanbackup::testing
