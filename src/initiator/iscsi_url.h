// IscsiUrl: where a LUN lives, in libiscsi's URL form
//   iscsi://[user[%password]@]host[:port][/target-iqn[/lun]]
// A URL without a target names only a portal (used for discovery); a URL without a LUN names a
// whole target. Pure value type; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "common/secret.h"

namespace wanbackup::initiator {

struct IscsiUrl {
  std::string host;  // name, IPv4 address, or IPv6 address without brackets
  uint16_t port = 3260;
  std::string target;      // IQN/EUI; empty for a portal-only URL
  std::optional<int> lun;  // absent when the URL names a whole target
  std::string user;        // CHAP user from the URL, if any
  Secret password;         // CHAP secret from the URL, if any (discouraged: see --help)

  // "host:port" (IPv6 in brackets), as libiscsi's connect wants it.
  std::string Portal() const;
  // The URL with any password removed; safe for logs and output.
  std::string ToDisplayString() const;
};

// Parses `text`. Errors are one line and name what is wrong, e.g.
// "iSCSI URL 'iscsi://h/iqn/x': LUN 'x' is not a number".
Result<IscsiUrl> ParseIscsiUrl(std::string_view text);

// As ParseIscsiUrl, for a URL that must name one LUN (a source or destination of data):
// InvalidArgument "'URL' names no LUN: ..." when it names only a portal or a target.
Result<IscsiUrl> ParseLunUrl(std::string_view text);

// True when `text` looks like an iSCSI URL (starts with "iscsi://"); used to tell URLs from paths.
bool LooksLikeIscsiUrl(std::string_view text);

}  // namespace wanbackup::initiator
