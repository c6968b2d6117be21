// What it takes to log in to an iSCSI target, and what the login negotiated.
// Plain value types; thread-compatible.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "common/secret.h"
#include "common/status.h"
#include "initiator/iscsi_url.h"

namespace wanbackup::initiator {

struct ChapCredentials {
  std::string user;         // empty: no CHAP
  Secret secret;            // the initiator's secret (one-way CHAP)
  std::string target_user;  // non-empty: mutual CHAP, the target proves itself too
  Secret target_secret;

  ChapCredentials Clone() const {
    return {user, secret.Clone(), target_user, target_secret.Clone()};
  }
};

enum class HeaderDigest { kNone, kCrc32c, kTargetChooses };

struct ConnectionOptions {
  std::string host;
  uint16_t port = 3260;
  std::string target;          // empty: a discovery session
  std::string initiator_name;  // empty: DefaultInitiatorName()
  ChapCredentials chap;
  HeaderDigest header_digest = HeaderDigest::kTargetChooses;
  // Bounds TCP connect + iSCSI login (several round trips); a silent host fails after this.
  std::chrono::milliseconds login_timeout{15000};
  // Bounds each SCSI command; the target or the network stalling longer is an error.
  std::chrono::milliseconds command_timeout{30000};
  // The TCP congestion control of our sockets (TCP_CONGESTION), which governs what we send: the
  // data of WRITEs. Empty: the host's default (net.ipv4.tcp_congestion_control).
  std::string congestion_control;

  ConnectionOptions Clone() const {
    return {host,          port,          target,          initiator_name,    chap.Clone(),
            header_digest, login_timeout, command_timeout, congestion_control};
  }
};

// OK when a TCP socket of this process may use congestion control `name` (tried on a socket of
// its own), else a one-line InvalidArgument naming what the host offers, or PermissionDenied.
Status CheckCongestionControl(const std::string& name);
// Sets congestion control `name` on socket `fd`, with the same errors.
Status SetCongestionControl(int fd, const std::string& name);

// Fills host/port/target and URL credentials from `url` into `options` (the URL's CHAP secret, if
// any, is moved out of it).
void ApplyUrl(IscsiUrl& url, ConnectionOptions* options);

// "iqn.2026-11.org.wanbackup:<hostname>".
std::string DefaultInitiatorName();

// What libiscsi 1.19 offers for MaxBurstLength, FirstBurstLength and its own
// MaxRecvDataSegmentLength, and cannot be told otherwise (lib/init.c, lib/login.c): the most any
// login negotiates.
inline constexpr uint32_t kInitiatorBurstLength = 262144;

// The operational parameters in force after login (RFC 7143 §13). Lengths in bytes.
struct NegotiatedParams {
  uint32_t max_burst_length = 0;    // largest solicited data sequence (Data-In per READ burst)
  uint32_t first_burst_length = 0;  // unsolicited data a WRITE may carry
  uint32_t initiator_max_recv_data_segment_length = 0;  // largest Data-In PDU we accept
  uint32_t target_max_recv_data_segment_length = 0;     // largest Data-Out PDU the target accepts
  bool immediate_data = false;
  bool initial_r2t = true;
  bool header_digest_crc32c = false;
  uint32_t max_connections = 1;
  uint32_t max_outstanding_r2t = 1;
  uint32_t error_recovery_level = 0;
  // Every key the target sent in its login responses, verbatim (secrets never appear here).
  std::map<std::string, std::string> target_keys;
};

}  // namespace wanbackup::initiator
