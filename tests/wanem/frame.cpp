#include "frame.h"

#include <cstring>

namespace wanem {
namespace {

constexpr uint8_t kTcp = 6;
// linux/virtio_net.h (its header does not compile as C++): gso_type values.
constexpr uint8_t kGsoNone = 0;
constexpr uint8_t kGsoEcn = 0x80;

uint16_t Load16(const uint8_t* p) {  // the host's order: what the kernel writes (little endian)
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// IP + TCP header bytes of the packet at `ip` of `length` bytes, or 0 when they do not parse.
size_t HeaderBytes(const uint8_t* ip, size_t length) {
  if (length < 20) return 0;
  size_t l3 = 0;
  uint8_t protocol = 0;
  switch (ip[0] >> 4) {
    case 4:
      l3 = static_cast<size_t>(ip[0] & 0x0f) * 4;
      protocol = ip[9];
      break;
    case 6:
      l3 = 40;
      protocol = ip[6];  // extension headers are not followed: such a packet does not parse
      break;
    default:
      return 0;
  }
  if (l3 < 20 || protocol != kTcp || length < l3 + 20) return 0;
  const size_t l4 = static_cast<size_t>(ip[l3 + 12] >> 4) * 4;
  if (l4 < 20 || length < l3 + l4) return 0;
  return l3 + l4;
}

}  // namespace

FrameInfo InspectFrame(const uint8_t* data, size_t length, size_t capacity, bool vnet) {
  FrameInfo info;
  const size_t prefix = FrameHeaderBytes(vnet);
  if (length > capacity || length <= prefix || length - prefix > kMaxIpBytes) return info;
  const size_t ip_bytes = length - prefix;
  info.ok = true;
  info.wire_bytes = static_cast<uint32_t>(ip_bytes);
  info.segments = 1;
  if (!vnet) return info;
  // struct virtio_net_hdr: flags, gso_type, hdr_len, gso_size, csum_start, csum_offset.
  const uint8_t gso_type = data[1];
  const uint16_t gso_size = Load16(data + 4);
  if ((gso_type & ~kGsoEcn) == kGsoNone) return info;
  const size_t headers = HeaderBytes(data + prefix, ip_bytes);
  if (gso_size == 0 || headers == 0 || headers >= ip_bytes) {
    info.ok = false;
    return info;
  }
  const size_t payload = ip_bytes - headers;
  const size_t segments = (payload + gso_size - 1) / gso_size;
  info.segments = static_cast<uint32_t>(segments);
  info.wire_bytes = static_cast<uint32_t>(ip_bytes + (segments - 1) * headers);
  return info;
}

}  // namespace wanem
