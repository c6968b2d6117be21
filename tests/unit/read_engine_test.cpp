// The read engine's decisions — which READ goes where, retries, reconnects, autotune, giving up —
// against a scripted target on a virtual clock (support/fake_transport.h). The same engine runs
// against the real tgt through the WAN emulator in tests/integration/copy_test.cpp.
#include "initiator/internal/read_engine.h"

#include <algorithm>
#include <memory>

#include <catch2/catch.hpp>

#include "support/fake_transport.h"

using namespace std::chrono_literals;
using wanbackup::ReadRequest;
using wanbackup::Status;
using wanbackup::StatusCode;
using wanbackup::initiator::TuningPlan;
using wanbackup::initiator::internal::ReadEngine;
using wanbackup::initiator::internal::ReadEngineConfig;
using wanbackup::testing::FakeAnswer;
using wanbackup::testing::FakeLinkOptions;
using wanbackup::testing::FakeRead;
using wanbackup::testing::FakeTransport;

namespace {

TuningPlan Plan(int connections, int queue_depth, uint64_t io_size, bool adapt = false,
                int max_connections = 16) {
  TuningPlan plan;
  plan.connections = connections;
  plan.queue_depth = queue_depth;
  plan.io_size = io_size;
  plan.adapt_connections = adapt;
  plan.max_connections = adapt ? max_connections : connections;
  return plan;
}

struct Rig {
  FakeTransport* fake = nullptr;  // owned by the engine
  std::unique_ptr<ReadEngine> engine;
};

// Builds an engine over a fake link; `script` sets the fake's hooks.
Rig Make(const FakeLinkOptions& link, const TuningPlan& plan,
         const std::function<void(FakeTransport&)>& script = {},
         std::chrono::milliseconds retry_timeout = 300s) {
  auto fake = std::make_unique<FakeTransport>(link);
  if (script) script(*fake);
  ReadEngineConfig config;
  config.geometry.name = "fake://target/0";
  config.geometry.size_bytes = link.lun_bytes;
  config.geometry.block_size = link.block_size;
  config.lun.block_size = link.block_size;
  config.lun.block_count = link.lun_bytes / link.block_size;
  config.rtt = link.rtt;
  config.plan = plan;
  config.retry_timeout = retry_timeout;
  Rig rig;
  rig.fake = fake.get();
  rig.engine = std::make_unique<ReadEngine>(std::move(fake), std::move(config));
  return rig;  // ReadAll starts it once everything is submitted: the same run on any machine
}

struct ReadOutcome {
  Status fatal;                  // Wait() failed: the source gave up
  std::vector<Status> failures;  // ranges that completed with an error
  std::vector<uint8_t> data;     // the LUN as read (empty when `shared_buffer`)
  bool content_ok = false;
};

// Reads the whole LUN in `request_bytes` requests, all submitted before the engine starts (so
// that how fast this thread runs cannot change what the engine decides). With `shared_buffer`
// every request reads into the same buffer (for long runs where only the engine's behaviour
// matters; nothing is checked).
ReadOutcome ReadAll(ReadEngine& engine, uint64_t request_bytes, bool shared_buffer = false) {
  const uint64_t size = engine.geometry().size_bytes;
  ReadOutcome out;
  std::vector<uint8_t> shared;
  if (shared_buffer) {
    shared.resize(request_bytes);
  } else {
    out.data.resize(size);
  }
  size_t submitted = 0;
  for (uint64_t off = 0; off < size; off += request_bytes) {
    ReadRequest r;
    r.offset = off;
    r.length = std::min(request_bytes, size - off);
    r.buffer = shared_buffer ? shared.data() : out.data.data() + off;
    r.tag = off;
    Status queued = engine.Submit(r);
    if (!queued.ok()) {  // the source failed already (a refused login, say)
      out.fatal = queued;
      return out;
    }
    ++submitted;
  }
  engine.Start();
  for (size_t i = 0; i < submitted; ++i) {
    auto c = engine.Wait();
    if (!c.ok()) {
      out.fatal = c.status();
      return out;
    }
    if (!c->status.ok()) out.failures.push_back(c->status);
  }
  if (!shared_buffer) {
    std::vector<uint8_t> want(size);
    FakeTransport::FillContent(0, want.data(), size);
    out.content_ok = want == out.data;
  }
  return out;
}

// The most READ bytes sent within any `span` of virtual time.
uint64_t MostBytesWithin(
    const std::vector<std::pair<FakeTransport::Clock::time_point, uint32_t>>& log,
    std::chrono::nanoseconds span) {
  uint64_t most = 0, sum = 0;
  size_t first = 0;
  for (size_t i = 0; i < log.size(); ++i) {
    sum += log[i].second;
    while (log[i].first - log[first].first >= span)
      sum -= log[first++].second;
    most = std::max(most, sum);
  }
  return most;
}

bool Covers(const FakeRead& read, uint64_t lba) {
  return read.lba <= lba && lba < read.lba + read.bytes / 512;
}

}  // namespace

TEST_CASE("read engine: reads a LUN whole over several connections", "[engine]") {
  FakeLinkOptions link;
  link.lun_bytes = 16 << 20;
  Rig rig = Make(link, Plan(4, 2, 256 << 10));
  ReadOutcome out = ReadAll(*rig.engine, 1 << 20);
  REQUIRE(out.fatal.ok());
  CHECK(out.failures.empty());
  CHECK(out.content_ok);
  CHECK(rig.fake->max_open_channels() == 4);
  CHECK(rig.fake->reads_past_end() == 0);
  CHECK(rig.engine->Stats().bytes_read == link.lun_bytes);
  CHECK(rig.engine->Stats().reconnects == 0);
  for (size_t c = 0; c < 4; ++c)
    CHECK(rig.fake->bytes_on(c) > 0);
}

TEST_CASE("read engine: a connection lost mid-READ is replaced and its READs re-issued",
          "[engine]") {
  FakeLinkOptions link;
  // Long enough that the run outlasts the reconnect: at 16 MiB the other two connections
  // sometimes read the rest before connection 1 logged in again (every full "[engine]" run on
  // 2026-11-27, never alone), and nothing was left to prove the relogin.
  link.lun_bytes = 64 << 20;
  Rig rig = Make(link, Plan(3, 2, 256 << 10), [](FakeTransport& fake) {
    fake.on_read = [](const FakeRead& r) {
      if (r.channel == 1 && r.login == 1 && r.nth == 4)
        return FakeAnswer{FakeAnswer::Kind::kLoseChannel};
      return FakeAnswer{};
    };
  });
  ReadOutcome out = ReadAll(*rig.engine, 1 << 20);
  REQUIRE(out.fatal.ok());
  CHECK(out.failures.empty());
  CHECK(out.content_ok);
  CHECK(rig.fake->reconnect_logins() >= 1);  // the new session had to prove the same device
  CHECK(rig.engine->Stats().reconnects >= 1);
  CHECK(rig.engine->Stats().bytes_read == link.lun_bytes);
}

TEST_CASE("read engine: a READ that times out costs its connection, not the data", "[engine]") {
  FakeLinkOptions link;
  link.lun_bytes = 8 << 20;
  link.command_timeout = 30s;
  Rig rig = Make(link, Plan(2, 2, 256 << 10), [](FakeTransport& fake) {
    fake.on_read = [](const FakeRead& r) {
      if (r.channel == 0 && r.login == 1 && r.nth == 3) return FakeAnswer{FakeAnswer::Kind::kHang};
      return FakeAnswer{};
    };
  });
  ReadOutcome out = ReadAll(*rig.engine, 1 << 20);
  REQUIRE(out.fatal.ok());
  CHECK(out.failures.empty());
  CHECK(out.content_ok);
  // The hung connection was torn down. Whether it logs in again before the last READ lands
  // (on the other connection, 30 s of virtual time after the rest) is a race: not asserted.
  CHECK(rig.fake->closes() >= 1);
  CHECK(rig.engine->Stats().retries >= 1);
  CHECK(rig.fake->elapsed() >= link.command_timeout);  // it waited for the timeout (virtual time)
}

TEST_CASE("read engine: with no progress for the retry timeout it gives up naming the range",
          "[engine]") {
  FakeLinkOptions link;
  link.lun_bytes = 4 << 20;
  link.command_timeout = 60s;
  Rig rig = Make(
      link, Plan(2, 2, 256 << 10),
      [](FakeTransport& fake) {
        fake.on_read = [](const FakeRead&) { return FakeAnswer{FakeAnswer::Kind::kHang}; };
      },
      20s);
  ReadOutcome out = ReadAll(*rig.engine, 1 << 20);
  REQUIRE_FALSE(out.fatal.ok());
  CHECK_THAT(out.fatal.message(),
             Catch::Contains("no progress for 20.00s") && Catch::Contains("unread from LBA 0 ("));
  CHECK(rig.engine->Stats().commands_in_flight == 0);
  CHECK(rig.fake->open_channels() == 0);  // every command stopped before the failure was told
}

TEST_CASE("read engine: a connection that answers slower gets fewer READs", "[engine]") {
  FakeLinkOptions link;
  link.lun_bytes = 64 << 20;
  link.channel_bytes_per_second = 20e6;
  link.slowdown = [](size_t channel) { return channel == 1 ? 8.0 : 1.0; };
  Rig rig = Make(link, Plan(4, 2, 256 << 10));
  ReadOutcome out = ReadAll(*rig.engine, 1 << 20);
  REQUIRE(out.fatal.ok());
  CHECK(out.content_ok);
  const uint64_t slow = rig.fake->bytes_on(1);
  for (size_t fast : {0, 2, 3}) {
    INFO("slow channel carried " << slow << " bytes, channel " << fast << " "
                                 << rig.fake->bytes_on(fast));
    CHECK(slow * 2 < rig.fake->bytes_on(fast));
  }
}

TEST_CASE("read engine: the last READ stops at the LUN's end and a short one is retried",
          "[engine]") {
  FakeLinkOptions link;
  link.lun_bytes = (1 << 20) + 3 * 512;  // not a multiple of the READ size
  const uint64_t last_lba = link.lun_bytes / 512 - 1;
  int shorts = 0;
  Rig rig = Make(link, Plan(2, 2, 64 << 10), [&](FakeTransport& fake) {
    fake.on_read = [&shorts, last_lba](const FakeRead& r) {
      if (Covers(r, last_lba) && shorts++ == 0) return FakeAnswer{FakeAnswer::Kind::kShort};
      return FakeAnswer{};
    };
  });
  ReadOutcome out = ReadAll(*rig.engine, 256 << 10);
  REQUIRE(out.fatal.ok());
  CHECK(out.failures.empty());
  CHECK(out.content_ok);
  CHECK(rig.fake->reads_past_end() == 0);
  CHECK(shorts >= 2);  // answered short once, then asked again
  CHECK(rig.engine->Stats().retries >= 1);
}

TEST_CASE("read engine: a range the target keeps answering short fails alone, named", "[engine]") {
  FakeLinkOptions link;
  link.lun_bytes = 1 << 20;
  const uint64_t last_lba = link.lun_bytes / 512 - 1;
  Rig rig = Make(link, Plan(2, 2, 64 << 10), [&](FakeTransport& fake) {
    fake.on_read = [last_lba](const FakeRead& r) {
      return Covers(r, last_lba) ? FakeAnswer{FakeAnswer::Kind::kShort} : FakeAnswer{};
    };
  });
  ReadOutcome out = ReadAll(*rig.engine, 256 << 10);
  REQUIRE(out.fatal.ok());
  REQUIRE(out.failures.size() == 1);  // the other ranges completed
  CHECK_THAT(out.failures[0].message(),
             Catch::Contains("fewer bytes than asked") && Catch::Contains("giving up after"));
  // The range is named by its first block, within the last request.
  CHECK_THAT(out.failures[0].message(), Catch::Contains("LBA 1"));
}

TEST_CASE("read engine: a medium error is retried twice, then that range fails", "[engine]") {
  FakeLinkOptions link;
  link.lun_bytes = 1 << 20;
  int tries = 0;
  uint32_t failed_bytes = 0;
  Rig rig = Make(link, Plan(1, 2, 64 << 10), [&](FakeTransport& fake) {
    fake.on_read = [&tries, &failed_bytes](const FakeRead& r) {
      if (!Covers(r, 0)) return FakeAnswer{};
      ++tries;
      failed_bytes = r.bytes;
      return FakeAnswer{FakeAnswer::Kind::kStatus, 0x02, 0x3};  // CHECK CONDITION, MEDIUM ERROR
    };
  });
  ReadOutcome out = ReadAll(*rig.engine, 256 << 10);
  REQUIRE(out.fatal.ok());
  REQUIRE(out.failures.size() == 1);
  CHECK(tries == 3);
  CHECK(rig.engine->Stats().bytes_read == link.lun_bytes - failed_bytes);  // never zero-filled
}

TEST_CASE("read engine: failed logins back off and retry, and a refused one ends the read",
          "[engine]") {
  FakeLinkOptions link;
  link.lun_bytes = 32 << 20;
  link.channel_bytes_per_second = 5e6;  // long enough to see the back-off through
  SECTION("transient") {
    Rig rig = Make(link, Plan(2, 2, 256 << 10), [](FakeTransport& fake) {
      fake.on_login = [](size_t channel, int attempt) {
        return channel == 1 && attempt <= 2 ? Status::Unavailable("connection refused")
                                            : Status::Ok();
      };
    });
    ReadOutcome out = ReadAll(*rig.engine, 1 << 20);
    REQUIRE(out.fatal.ok());
    CHECK(out.content_ok);
    CHECK(rig.fake->logins() >= 4);  // the first session, two refusals, the one that worked
  }
  SECTION("permanent") {
    Rig rig = Make(link, Plan(2, 2, 256 << 10), [](FakeTransport& fake) {
      fake.on_login = [](size_t channel, int) {
        return channel == 1 ? Status::AuthFailed("CHAP refused") : Status::Ok();
      };
    });
    ReadOutcome out = ReadAll(*rig.engine, 1 << 20);
    REQUIRE_FALSE(out.fatal.ok());
    CHECK(out.fatal.code() == StatusCode::kAuthFailed);
  }
}

TEST_CASE("read engine: autotune adds connections while each step pays, then stops",
          "[engine][autotune]") {
  // 50 ms round trips and 2 x 8 KiB outstanding: each connection carries about 320 kB/s (its
  // window); the link 3.2 MB/s. 4 -> 6 -> 9 connections pay 50 % each; 14 only 10 %.
  FakeLinkOptions link;
  link.lun_bytes = 40 << 20;
  link.rtt = 50ms;
  link.channel_bytes_per_second = 10e6;
  link.link_bytes_per_second = [](int) { return 3.2e6; };
  Rig rig = Make(link, Plan(4, 2, 8 << 10, /*adapt=*/true));
  ReadOutcome out = ReadAll(*rig.engine, 1 << 20, /*shared_buffer=*/true);
  REQUIRE(out.fatal.ok());
  CHECK(out.failures.empty());
  const auto stats = rig.engine->Stats();
  INFO("peak " << stats.peak_connections << ", now " << stats.connections);
  CHECK(stats.peak_connections == 14);  // it stopped before its maximum (16)
  CHECK(stats.connections == stats.peak_connections);
}

TEST_CASE("read engine: autotune drops the connections of a step that cost throughput",
          "[engine][autotune]") {
  // As above, but beyond 9 flows this link collapses to half (a shaper that drops under many).
  FakeLinkOptions link;
  link.lun_bytes = 40 << 20;
  link.rtt = 50ms;
  link.channel_bytes_per_second = 10e6;
  link.link_bytes_per_second = [](int n) { return n <= 9 ? 3.2e6 : 1.6e6; };
  Rig rig = Make(link, Plan(4, 2, 8 << 10, /*adapt=*/true));
  ReadOutcome out = ReadAll(*rig.engine, 1 << 20, /*shared_buffer=*/true);
  REQUIRE(out.fatal.ok());
  const auto stats = rig.engine->Stats();
  INFO("peak " << stats.peak_connections << ", now " << stats.connections);
  CHECK(stats.peak_connections == 14);  // 4 -> 6 -> 9 -> 14
  CHECK(stats.connections == 9);        // and back
  CHECK(rig.fake->open_channels() == 9);
}

TEST_CASE("read engine: paced READs go out evenly, not in the bunches completions come in",
          "[engine]") {
  // Fast connections on a long link: the READs issued together complete together.
  FakeLinkOptions link;
  link.lun_bytes = 64 << 20;
  link.rtt = 100ms;
  link.channel_bytes_per_second = 1e9;
  TuningPlan plan = Plan(4, 8, 256 << 10);  // 8 MiB per round trip: 84 MB/s
  plan.pace_reads = true;
  Rig paced = Make(link, plan);
  ReadOutcome out = ReadAll(*paced.engine, 1 << 20);
  REQUIRE(out.fatal.ok());
  CHECK(out.content_ok);
  // At most one READ ahead of a pace of 0.95 x 84 MB/s: 80 KB per ms, plus two READs.
  CHECK(MostBytesWithin(paced.fake->read_log(), 1ms) <= 2 * (256 << 10) + 80'000);
  CHECK(paced.engine->Stats().bytes_read == link.lun_bytes);

  plan.pace_reads = false;  // the same run unpaced: whole round trips' worth at once
  Rig bunched = Make(link, plan);
  REQUIRE(ReadAll(*bunched.engine, 1 << 20).content_ok);
  CHECK(MostBytesWithin(bunched.fake->read_log(), 1ms) > 8 * (256 << 10));
}
