// The write engine's decisions — WRITEs redone after a lost connection or a timeout, sharing by
// speed, WRITE SAME for zeros and the fallback when it is refused, SYNCHRONIZE CACHE before
// success — against a scripted target on a virtual clock (support/fake_transport.h), which keeps
// what lands so the LUN can be compared byte for byte with the input.
#include "initiator/internal/write_engine.h"

#include <algorithm>
#include <memory>

#include <catch2/catch.hpp>

#include "support/fake_transport.h"

using namespace std::chrono_literals;
using wanbackup::Status;
using wanbackup::StatusCode;
using wanbackup::initiator::LunInfo;
using wanbackup::initiator::TuningPlan;
using wanbackup::initiator::internal::BlockOp;
using wanbackup::initiator::internal::CheckWriteTarget;
using wanbackup::initiator::internal::WriteEngine;
using wanbackup::initiator::internal::WriteEngineConfig;
using wanbackup::initiator::internal::WriteRequest;
using wanbackup::testing::FakeAnswer;
using wanbackup::testing::FakeCommand;
using wanbackup::testing::FakeLinkOptions;
using wanbackup::testing::FakeTransport;

namespace {

constexpr int kCheckCondition = 0x02;
constexpr int kMediumError = 0x3, kIllegalRequest = 0x5;

TuningPlan WritePlan(int connections, int queue_depth, uint64_t io_size) {
  TuningPlan plan;
  plan.connections = connections;
  plan.queue_depth = queue_depth;
  plan.io_size = io_size;
  plan.max_connections = connections;
  return plan;
}

struct WriteRig {
  FakeTransport* fake = nullptr;  // owned by the engine
  std::unique_ptr<WriteEngine> engine;
};

WriteRig MakeWriteRig(const FakeLinkOptions& link, const TuningPlan& plan,
                      const std::function<void(FakeTransport&)>& script = {}, bool thin = false,
                      std::chrono::milliseconds retry_timeout = 300s,
                      const std::function<void(LunInfo&)>& describe = {}) {
  auto fake = std::make_unique<FakeTransport>(link);
  if (script) script(*fake);
  WriteEngineConfig config;
  config.geometry.name = "fake://target/0";
  config.geometry.size_bytes = link.lun_bytes;
  config.geometry.block_size = link.block_size;
  config.lun.block_size = link.block_size;
  config.lun.block_count = link.lun_bytes / link.block_size;
  config.lun.thin_provisioned = thin;
  config.lun.unmapped_reads_zero = thin;
  if (describe) describe(config.lun);
  config.rtt = link.rtt;
  config.plan = plan;
  config.retry_timeout = retry_timeout;
  WriteRig rig;
  rig.fake = fake.get();
  rig.engine = std::make_unique<WriteEngine>(std::move(fake), std::move(config));
  return rig;
}

// An image unlike what the fake LUN holds at first: a pattern, with every fourth MiB all zeros.
std::vector<uint8_t> Image(uint64_t size) {
  std::vector<uint8_t> image(size);
  for (uint64_t i = 0; i < size; ++i) {
    image[i] = (i >> 20) % 4 == 3 ? 0 : static_cast<uint8_t>((i * 7 + (i >> 9)) ^ 0x5a);
  }
  return image;
}

struct WriteOutcome {
  Status fatal;                  // Submit/Wait failed: the engine gave up
  std::vector<Status> failures;  // ranges that completed with an error
  Status finish;                 // Finish(): the SYNCHRONIZE CACHE's verdict
};

// Writes `image` in `request_bytes` requests, all submitted before the engine starts (the same
// run on any machine), then Finish().
WriteOutcome WriteAll(WriteEngine& engine, const std::vector<uint8_t>& image,
                      uint64_t request_bytes) {
  WriteOutcome out;
  size_t submitted = 0;
  for (uint64_t off = 0; off < image.size(); off += request_bytes) {
    WriteRequest r;
    r.offset = off;
    r.length = std::min<uint64_t>(request_bytes, image.size() - off);
    r.data = image.data() + off;
    r.tag = off;
    out.fatal = engine.Submit(r);
    if (!out.fatal.ok()) return out;
    ++submitted;
  }
  engine.Start();
  for (size_t i = 0; i < submitted / 2; ++i) {  // Finish() collects the rest
    auto c = engine.Wait();
    if (!c.ok()) {
      out.fatal = c.status();
      return out;
    }
    if (!c->status.ok()) out.failures.push_back(c->status);
  }
  out.finish = engine.Finish();
  return out;
}

}  // namespace

TEST_CASE("write engine: the LUN ends byte for byte as the input, synchronized last",
          "[engine][write]") {
  FakeLinkOptions link;
  link.lun_bytes = 8 << 20;
  WriteRig rig = MakeWriteRig(link, WritePlan(3, 4, 264 << 10));
  const std::vector<uint8_t> image = Image(link.lun_bytes);
  WriteOutcome out = WriteAll(*rig.engine, image, 1 << 20);
  REQUIRE(out.fatal.ok());
  CHECK(out.failures.empty());
  REQUIRE(out.finish.ok());
  CHECK(rig.fake->Disk() == image);
  CHECK(rig.fake->syncs() == 1);
  CHECK(rig.fake->writes_after_sync() == 0);  // SYNCHRONIZE CACHE came after every WRITE
  // The two all-zero MiB went as WRITE SAME, without UNMAP on a LUN that is not thin.
  CHECK(rig.fake->bytes_zeroed() == 2 << 20);
  CHECK(rig.fake->bytes_written() == link.lun_bytes - (2 << 20));
  CHECK(rig.fake->unmaps() == 0);
  CHECK(rig.engine->Stats().bytes_written == link.lun_bytes);
  CHECK(rig.fake->max_open_channels() == 3);
}

TEST_CASE("write engine: zeros are unmapped on a thin LUN that reads unmapped blocks as zeros",
          "[engine][write]") {
  FakeLinkOptions link;
  link.lun_bytes = 4 << 20;
  WriteRig rig = MakeWriteRig(link, WritePlan(2, 2, 264 << 10), {}, /*thin=*/true);
  const std::vector<uint8_t> image = Image(link.lun_bytes);
  WriteOutcome out = WriteAll(*rig.engine, image, 1 << 20);
  REQUIRE(out.finish.ok());
  CHECK(rig.fake->Disk() == image);
  CHECK(rig.fake->unmaps() == rig.fake->write_sames());
  CHECK(rig.fake->unmaps() >= 1);
}

TEST_CASE("write engine: a provisioning page with WRITE SAME(16) UNMAP lets zeros be unmapped",
          "[engine][write]") {
  FakeLinkOptions link;
  link.lun_bytes = 4 << 20;
  WriteRig rig =
      MakeWriteRig(link, WritePlan(2, 2, 264 << 10), {}, /*thin=*/true, 300s, [](LunInfo& lun) {
        lun.has_provisioning_page = true;
        lun.unmap_supported = true;
        lun.write_same_unmap_supported = true;
        lun.page_unmapped_reads_zero = true;
        lun.provisioning_type = 2;
      });
  const std::vector<uint8_t> image = Image(link.lun_bytes);
  WriteOutcome out = WriteAll(*rig.engine, image, 1 << 20);
  REQUIRE(out.finish.ok());
  CHECK(rig.fake->Disk() == image);
  CHECK(rig.fake->unmaps() >= 1);
  CHECK(rig.fake->unmaps() == rig.fake->write_sames());
}

TEST_CASE("write engine: a provisioning page without WRITE SAME(16) UNMAP keeps zeros mapped",
          "[engine][write]") {
  // READ CAPACITY(16) says thin and LBPRZ, but the page lists only UNMAP (LBPU): WRITE SAME
  // still writes the zeros, without the UNMAP bit the target did not promise to honour.
  FakeLinkOptions link;
  link.lun_bytes = 4 << 20;
  WriteRig rig =
      MakeWriteRig(link, WritePlan(2, 2, 264 << 10), {}, /*thin=*/true, 300s, [](LunInfo& lun) {
        lun.has_provisioning_page = true;
        lun.unmap_supported = true;
        lun.write_same_unmap_supported = false;
      });
  const std::vector<uint8_t> image = Image(link.lun_bytes);
  WriteOutcome out = WriteAll(*rig.engine, image, 1 << 20);
  REQUIRE(out.finish.ok());
  CHECK(rig.fake->Disk() == image);
  CHECK(rig.fake->write_sames() >= 1);
  CHECK(rig.fake->unmaps() == 0);
}

TEST_CASE("write engine: UNMAP needs LBPME and LBPRZ, and LBPWS only where the page exists",
          "[engine][write]") {
  using wanbackup::initiator::internal::UnmapsZeros;
  LunInfo lun;
  CHECK_FALSE(UnmapsZeros(lun));
  lun.thin_provisioned = true;
  CHECK_FALSE(UnmapsZeros(lun));  // deallocated blocks' content undefined (LBPRZ=0)
  lun.unmapped_reads_zero = true;
  CHECK(UnmapsZeros(lun));  // no page: READ CAPACITY(16) alone, as before
  lun.has_provisioning_page = true;
  CHECK_FALSE(UnmapsZeros(lun));
  lun.write_same_unmap_supported = true;
  CHECK(UnmapsZeros(lun));
  lun.thin_provisioned = false;
  CHECK_FALSE(UnmapsZeros(lun));
}

TEST_CASE("write engine: a connection lost mid-WRITE is replaced and its WRITEs redone",
          "[engine][write]") {
  FakeLinkOptions link;
  link.lun_bytes = 8 << 20;
  link.channel_bytes_per_second = 2e6;  // a run longer than the reconnect's back-off (0.5 s)
  WriteRig rig = MakeWriteRig(link, WritePlan(3, 2, 264 << 10), [](FakeTransport& fake) {
    fake.on_write = [](const FakeCommand& c) {
      if (c.channel == 1 && c.login == 1 && c.nth == 4)
        return FakeAnswer{FakeAnswer::Kind::kLoseChannel};
      return FakeAnswer{};
    };
  });
  const std::vector<uint8_t> image = Image(link.lun_bytes);
  WriteOutcome out = WriteAll(*rig.engine, image, 1 << 20);
  REQUIRE(out.fatal.ok());
  CHECK(out.failures.empty());
  REQUIRE(out.finish.ok());
  CHECK(rig.fake->Disk() == image);
  CHECK(rig.fake->reconnect_logins() >= 1);  // the new session had to prove the same device
  CHECK(rig.engine->Stats().reconnects >= 1);
  CHECK(rig.fake->writes_after_sync() == 0);
}

TEST_CASE("write engine: a WRITE that times out costs its connection, not the data",
          "[engine][write]") {
  FakeLinkOptions link;
  link.lun_bytes = 4 << 20;
  link.command_timeout = 30s;
  WriteRig rig = MakeWriteRig(link, WritePlan(2, 2, 264 << 10), [](FakeTransport& fake) {
    fake.on_write = [](const FakeCommand& c) {
      if (c.channel == 0 && c.login == 1 && c.nth == 3) return FakeAnswer{FakeAnswer::Kind::kHang};
      return FakeAnswer{};
    };
  });
  const std::vector<uint8_t> image = Image(link.lun_bytes);
  WriteOutcome out = WriteAll(*rig.engine, image, 1 << 20);
  REQUIRE(out.fatal.ok());
  CHECK(out.failures.empty());
  REQUIRE(out.finish.ok());
  CHECK(rig.fake->Disk() == image);
  CHECK(rig.engine->Stats().retries >= 1);
  CHECK(rig.fake->elapsed() >= link.command_timeout);  // it waited for the timeout (virtual time)
}

TEST_CASE("write engine: WRITEs that never finish end the run naming the range",
          "[engine][write]") {
  FakeLinkOptions link;
  link.lun_bytes = 2 << 20;
  link.command_timeout = 60s;
  WriteRig rig = MakeWriteRig(
      link, WritePlan(2, 2, 264 << 10),
      [](FakeTransport& fake) {
        fake.on_write = [](const FakeCommand&) { return FakeAnswer{FakeAnswer::Kind::kHang}; };
      },
      false, 20s);
  WriteOutcome out = WriteAll(*rig.engine, Image(link.lun_bytes), 1 << 20);
  const Status failed = out.fatal.ok() ? out.finish : out.fatal;
  REQUIRE_FALSE(failed.ok());
  CHECK_THAT(failed.message(), Catch::Contains("no progress for 20.00s") &&
                                   Catch::Contains("unwritten from LBA 0 ("));
  CHECK(rig.fake->syncs() == 0);
}

TEST_CASE("write engine: a connection that answers slower gets fewer WRITEs", "[engine][write]") {
  FakeLinkOptions link;
  link.lun_bytes = 24 << 20;
  link.channel_bytes_per_second = 20e6;
  link.slowdown = [](size_t channel) { return channel == 1 ? 8.0 : 1.0; };
  WriteRig rig = MakeWriteRig(link, WritePlan(4, 2, 264 << 10));
  std::vector<uint8_t> image = Image(link.lun_bytes);
  std::replace(image.begin(), image.end(), uint8_t{0}, uint8_t{1});  // data only
  WriteOutcome out = WriteAll(*rig.engine, image, 1 << 20);
  REQUIRE(out.finish.ok());
  CHECK(rig.fake->Disk() == image);
  const uint64_t slow = rig.fake->bytes_on(1);
  for (size_t fast : {0, 2, 3}) {
    INFO("slow channel carried " << slow << " bytes, channel " << fast << " "
                                 << rig.fake->bytes_on(fast));
    CHECK(slow * 2 < rig.fake->bytes_on(fast));
  }
}

TEST_CASE("write engine: a refused WRITE SAME becomes WRITEs of zeros", "[engine][write]") {
  FakeLinkOptions link;
  link.lun_bytes = 8 << 20;
  int refused = 0;
  WriteRig rig = MakeWriteRig(link, WritePlan(2, 2, 264 << 10), [&refused](FakeTransport& fake) {
    fake.on_write = [&refused](const FakeCommand& c) {
      if (c.op != BlockOp::kWriteZeros) return FakeAnswer{};
      ++refused;  // ILLEGAL REQUEST: invalid operation code
      return FakeAnswer{FakeAnswer::Kind::kStatus, kCheckCondition, kIllegalRequest};
    };
  });
  const std::vector<uint8_t> image = Image(link.lun_bytes);
  WriteOutcome out = WriteAll(*rig.engine, image, 1 << 20);
  REQUIRE(out.fatal.ok());
  CHECK(out.failures.empty());
  REQUIRE(out.finish.ok());
  CHECK(rig.fake->Disk() == image);
  CHECK(refused >= 1);
  CHECK(rig.fake->write_sames() == 0);
  CHECK(rig.fake->bytes_written() == link.lun_bytes);  // the zeros went as data
  CHECK(rig.engine->Stats().write_same_refused);
}

TEST_CASE("write engine: WRITE SAMEs stay within the LUN's maximum WRITE SAME length",
          "[engine][write]") {
  FakeLinkOptions link;
  link.lun_bytes = 4 << 20;
  uint32_t longest = 0;
  const auto watch = [&longest](FakeTransport& fake) {
    fake.on_write = [&longest](const FakeCommand& c) {
      if (c.op == BlockOp::kWriteZeros) longest = std::max(longest, c.bytes);
      return FakeAnswer{};
    };
  };
  const std::vector<uint8_t> zeros(link.lun_bytes, 0);
  SECTION("no limit reported: one WRITE SAME for the 4 MiB") {
    WriteRig rig = MakeWriteRig(link, WritePlan(2, 2, 264 << 10), watch);
    REQUIRE(WriteAll(*rig.engine, zeros, 4 << 20).finish.ok());
    CHECK(rig.fake->write_sames() == 1);
    CHECK(longest == 4u << 20);
  }
  SECTION("a limit of 1024 blocks (512 KiB): eight") {
    WriteRig rig = MakeWriteRig(link, WritePlan(2, 2, 264 << 10), watch, false, 300s,
                                [](LunInfo& lun) { lun.max_write_same_blocks = 1024; });
    REQUIRE(WriteAll(*rig.engine, zeros, 4 << 20).finish.ok());
    CHECK(rig.fake->write_sames() == 8);
    CHECK(longest == 512u << 10);
    CHECK(rig.fake->bytes_written() == 0);  // none refused: no zeros went as data
  }
}

TEST_CASE("write engine: the all-zero pieces inside a larger WRITE go as WRITE SAME",
          "[engine][write]") {
  FakeLinkOptions link;
  link.lun_bytes = 2 << 20;
  WriteRig rig = MakeWriteRig(link, WritePlan(2, 2, 128 << 10));
  std::vector<uint8_t> image(link.lun_bytes, 0x77);
  std::fill(image.begin() + (512 << 10), image.begin() + (1024 << 10), 0);  // 4 pieces of zeros
  WriteOutcome out = WriteAll(*rig.engine, image, 1 << 20);  // two writes, neither all zero
  REQUIRE(out.fatal.ok());
  REQUIRE(out.finish.ok());
  CHECK(rig.fake->Disk() == image);
  CHECK(rig.fake->write_sames() == 4);
  CHECK(rig.fake->bytes_written() == link.lun_bytes - (512 << 10));
  CHECK(rig.engine->Stats().bytes_zeroed == 512u << 10);
}

TEST_CASE("write engine: a target without SYNCHRONIZE CACHE(16) gets the 10-byte command",
          "[engine][write]") {
  FakeLinkOptions link;
  link.lun_bytes = 2 << 20;
  int refused = 0;
  WriteRig rig = MakeWriteRig(link, WritePlan(2, 2, 264 << 10), [&refused](FakeTransport& fake) {
    fake.on_write = [&refused](const FakeCommand& c) {
      if (c.op != BlockOp::kSynchronizeCache || c.legacy) return FakeAnswer{};
      ++refused;
      return FakeAnswer{FakeAnswer::Kind::kStatus, kCheckCondition, kIllegalRequest};
    };
  });
  const std::vector<uint8_t> image = Image(link.lun_bytes);
  WriteOutcome out = WriteAll(*rig.engine, image, 1 << 20);
  REQUIRE(out.fatal.ok());
  REQUIRE(out.finish.ok());
  CHECK(refused == 1);
  CHECK(rig.fake->syncs() == 1);  // the 10-byte one
  CHECK(rig.fake->Disk() == image);
}

TEST_CASE("write engine: a SYNCHRONIZE CACHE that fails fails the run", "[engine][write]") {
  FakeLinkOptions link;
  link.lun_bytes = 2 << 20;
  int syncs = 0;
  WriteRig rig = MakeWriteRig(link, WritePlan(2, 2, 264 << 10), [&syncs](FakeTransport& fake) {
    fake.on_write = [&syncs](const FakeCommand& c) {
      if (c.op != BlockOp::kSynchronizeCache) return FakeAnswer{};
      ++syncs;
      return FakeAnswer{FakeAnswer::Kind::kStatus, kCheckCondition, kMediumError};
    };
  });
  WriteOutcome out = WriteAll(*rig.engine, Image(link.lun_bytes), 1 << 20);
  REQUIRE(out.fatal.ok());
  CHECK(out.failures.empty());
  REQUIRE_FALSE(out.finish.ok());
  CHECK_THAT(out.finish.message(),
             Catch::Contains("durable") && Catch::Contains("SYNCHRONIZE CACHE(16)"));
  CHECK(syncs == 3);  // a medium error is tried three times
  CHECK(rig.fake->syncs() == 0);
}

TEST_CASE("write engine: a LUN too small, of another block size or write-protected is refused",
          "[engine][write]") {
  LunInfo lun;
  lun.block_size = 4096;
  lun.block_count = 1024;  // 4 MiB
  CHECK(CheckWriteTarget("lun", lun, 4 << 20).ok());
  CHECK(CheckWriteTarget("lun", lun, 1 << 20).ok());
  const Status small = CheckWriteTarget("lun", lun, (4 << 20) + 4096);
  CHECK(small.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(small.message(), Catch::Contains("less than the image"));
  const Status blocks = CheckWriteTarget("lun", lun, (1 << 20) + 512);
  CHECK(blocks.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(blocks.message(), Catch::Contains("do not divide"));
  lun.write_protected = true;  // MODE SENSE's WP bit
  const Status protected_lun = CheckWriteTarget("lun", lun, 1 << 20);
  CHECK(protected_lun.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(protected_lun.message(), Catch::Contains("write-protected"));
}
