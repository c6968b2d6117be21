// Frames read from the emulator's TUN devices. Per packet (the default), a frame is one IP
// packet of at most the MTU. With super-packets (--gso), the devices carry a virtio_net_hdr
// in front of each frame and take the kernel's TCP segmentation offload: one frame may be a
// TSO super-packet of up to 64 KiB that the sender's TCP cut into MSS-sized segments only on
// paper (gso_size); it is forwarded whole, header unchanged, and the receiving kernel takes it
// as the segments. Fewer, larger frames: the emulator's cost per byte falls several times,
// while TCP still sees a link of the MTU (MSS 1448 at 1500).
//
// The link is charged what the segments would have cost on the wire: the IP length plus one
// more set of IP + TCP headers per extra segment, so a 1 Gbit/s link carries the same goodput
// in both modes. Loss, blackhole and queue drops take whole frames: a super-packet lost is a
// burst of segments lost, so loss experiments use the per-packet mode.
// Pure functions: no I/O.
#pragma once

#include <cstddef>
#include <cstdint>

namespace wanem {

// sizeof(struct virtio_net_hdr) (linux/virtio_net.h), set with TUNSETVNETHDRSZ.
inline constexpr size_t kVnetHeaderBytes = 10;
// The largest IP packet, and so the largest super-packet.
inline constexpr size_t kMaxIpBytes = 65535;

struct FrameInfo {
  bool ok = false;          // false: truncated, or a super-packet whose headers do not parse
  uint32_t wire_bytes = 0;  // what the frame costs the emulated link (IP bytes of its segments)
  uint32_t segments = 0;    // packets it stands for on the link
};

// What the frame of `length` bytes at `data` costs the link. `length` is what read() returned,
// `capacity` the buffer it was read into: read() on a TUN device returns the frame's full
// length even when it copied only `capacity` bytes, and such a frame is not forwarded.
// `vnet`: the frame starts with a virtio_net_hdr (the --gso mode).
FrameInfo InspectFrame(const uint8_t* data, size_t length, size_t capacity, bool vnet);

// The bytes of a frame that are the IP packet (after the virtio_net_hdr when `vnet`).
inline size_t FrameHeaderBytes(bool vnet) {
  return vnet ? kVnetHeaderBytes : 0;
}

}  // namespace wanem
