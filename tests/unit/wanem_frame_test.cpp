// The emulator's frames (tests/wanem/frame.h): what a TSO super-packet costs the link, and that
// a truncated or unparsable frame is never forwarded.
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "frame.h"

using wanem::FrameInfo;
using wanem::InspectFrame;
using wanem::kVnetHeaderBytes;

namespace {

constexpr uint8_t kGsoTcpV4 = 1, kGsoTcpV6 = 4, kGsoEcn = 0x80;

// A frame as the TUN device hands it over: virtio_net_hdr (when `vnet`), an IPv4 or IPv6
// header, a TCP header of `tcp_header` bytes and `payload` bytes of data.
std::vector<uint8_t> Frame(bool vnet, int ip_version, size_t tcp_header, size_t payload,
                           uint8_t gso_type, uint16_t gso_size) {
  const size_t ip_header = ip_version == 4 ? 20 : 40;
  std::vector<uint8_t> f((vnet ? kVnetHeaderBytes : 0) + ip_header + tcp_header + payload, 0);
  uint8_t* p = f.data();
  if (vnet) {
    p[1] = gso_type;
    std::memcpy(p + 4, &gso_size, sizeof gso_size);  // host order, as the kernel writes it
    p += kVnetHeaderBytes;
  }
  if (ip_version == 4) {
    p[0] = 0x45;  // IPv4, 5 words of header
    p[9] = 6;     // TCP
  } else {
    p[0] = 0x60;
    p[6] = 6;
  }
  p[ip_header + 12] = static_cast<uint8_t>((tcp_header / 4) << 4);
  return f;
}

FrameInfo Inspect(const std::vector<uint8_t>& f, bool vnet) {
  return InspectFrame(f.data(), f.size(), f.size(), vnet);
}

}  // namespace

TEST_CASE("wanem frame: a packet costs its IP bytes, one segment", "[wanem]") {
  const auto plain = Frame(false, 4, 32, 1448, 0, 0);
  const FrameInfo a = Inspect(plain, false);
  CHECK(a.ok);
  CHECK(a.segments == 1);
  CHECK(a.wire_bytes == 1500);
  // The same packet with a virtio_net_hdr and no segmentation: the header costs nothing.
  const FrameInfo b = Inspect(Frame(true, 4, 32, 1448, 0, 0), true);
  CHECK(b.ok);
  CHECK(b.segments == 1);
  CHECK(b.wire_bytes == 1500);
}

TEST_CASE("wanem frame: a super-packet costs its segments' bytes, headers included", "[wanem]") {
  SECTION("IPv4, 45 full segments of a 64 KiB TSO frame") {
    const FrameInfo f = Inspect(Frame(true, 4, 32, 45 * 1448, kGsoTcpV4, 1448), true);
    CHECK(f.ok);
    CHECK(f.segments == 45);
    CHECK(f.wire_bytes == 45 * 1500);  // what 45 packets of 1500 bytes take on the wire
  }
  SECTION("a short last segment is one more segment, with its own headers") {
    const FrameInfo f =
        Inspect(Frame(true, 4, 32, 10 * 1448 + 100, kGsoTcpV4 | kGsoEcn, 1448), true);
    CHECK(f.ok);
    CHECK(f.segments == 11);
    CHECK(f.wire_bytes == 10 * 1500 + 52 + 100);
  }
  SECTION("IPv6") {
    const FrameInfo f = Inspect(Frame(true, 6, 32, 4 * 1428, kGsoTcpV6, 1428), true);
    CHECK(f.ok);
    CHECK(f.segments == 4);
    CHECK(f.wire_bytes == 4 * (40 + 32 + 1428));
  }
}

TEST_CASE("wanem frame: a truncated or unparsable frame is not forwarded", "[wanem]") {
  auto f = Frame(true, 4, 32, 20 * 1448, kGsoTcpV4, 1448);
  // read() on a TUN device returns the frame's whole length even when the buffer was smaller.
  CHECK_FALSE(InspectFrame(f.data(), f.size(), f.size() - 1, true).ok);
  CHECK_FALSE(InspectFrame(f.data(), 1501, 1500, false).ok);
  CHECK_FALSE(Inspect(Frame(true, 4, 32, 2000, kGsoTcpV4, 0), true).ok);  // no segment size
  auto not_tcp = Frame(true, 4, 32, 3000, kGsoTcpV4, 1448);
  not_tcp[kVnetHeaderBytes + 9] = 17;  // UDP
  CHECK_FALSE(Inspect(not_tcp, true).ok);
  auto bad_version = Frame(true, 4, 32, 3000, kGsoTcpV4, 1448);
  bad_version[kVnetHeaderBytes] = 0x75;
  CHECK_FALSE(Inspect(bad_version, true).ok);
  const std::vector<uint8_t> header_only(kVnetHeaderBytes, 0);
  CHECK_FALSE(Inspect(header_only, true).ok);
}

TEST_CASE("wanem frame: a frame that fills its slot exactly is whole, one byte more was cut",
          "[wanem]") {
  // The emulator reads into a slot one byte larger than the largest frame (direction.cpp) and
  // passes the largest frame as the capacity: read() returning more than that means the kernel
  // had more to give than the slot took.
  const size_t largest = kVnetHeaderBytes + wanem::kMaxIpBytes;
  std::vector<uint8_t> slot = Frame(true, 4, 32, wanem::kMaxIpBytes - 52, kGsoTcpV4, 1448);
  REQUIRE(slot.size() == largest);
  const FrameInfo whole = InspectFrame(slot.data(), largest, largest, true);
  CHECK(whole.ok);
  CHECK(whole.segments == 46);  // 65483 bytes of data in segments of 1448: 45 full, one short
  CHECK(whole.wire_bytes == wanem::kMaxIpBytes + 45 * 52);
  slot.push_back(0);
  CHECK_FALSE(InspectFrame(slot.data(), largest + 1, largest, true).ok);
  // A TUN device's read() reports the frame's length, not what it copied: far beyond the slot.
  CHECK_FALSE(InspectFrame(slot.data(), 2 * largest, largest, true).ok);
}
