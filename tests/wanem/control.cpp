#include "control.h"

#include <cstdio>
#include <sstream>
#include <vector>

#include "common/units.h"

namespace wanem {
namespace {

using wanbackup::Result;
using wanbackup::Status;

std::vector<std::string> Words(std::string_view line) {
  std::vector<std::string> words;
  std::istringstream in{std::string(line)};
  for (std::string w; in >> w;)
    words.push_back(w);
  return words;
}

bool ParseWhich(const std::string& word, Which* which) {
  if (word == "ab")
    *which = Which::kAB;
  else if (word == "ba")
    *which = Which::kBA;
  else if (word == "both")
    *which = Which::kBoth;
  else
    return false;
  return true;
}

}  // namespace

Result<Command> ParseCommand(std::string_view line) {
  std::vector<std::string> words = Words(line);
  if (words.empty()) return Status::InvalidArgument("empty command");
  Command cmd;
  const std::string verb = words[0];
  size_t next = 1;
  if (verb == "ping" || verb == "show" || verb == "stats" || verb == "stop") {
    if (words.size() != 1) return Status::InvalidArgument(verb + " takes no arguments");
    cmd.kind = verb == "ping"    ? Command::Kind::kPing
               : verb == "show"  ? Command::Kind::kShow
               : verb == "stats" ? Command::Kind::kStats
                                 : Command::Kind::kStop;
    return cmd;
  }
  if (verb != "set" && verb != "blackhole") {
    return Status::InvalidArgument("unknown command '" + verb +
                                   "' (ping, show, stats, set, blackhole, stop)");
  }
  if (next < words.size() && ParseWhich(words[next], &cmd.which)) ++next;

  if (verb == "blackhole") {
    cmd.kind = Command::Kind::kBlackhole;
    if (next + 1 != words.size()) {
      return Status::InvalidArgument("usage: blackhole [ab|ba|both] DURATION (0 lifts it)");
    }
    auto d = wanbackup::ParseDuration(words[next], "s");
    if (!d.ok()) return d.status();
    cmd.blackhole_ns = d->count();
    return cmd;
  }

  cmd.kind = Command::Kind::kSet;
  if (next == words.size()) return Status::InvalidArgument("set: nothing to set");
  for (; next < words.size(); ++next) {
    const std::string& kv = words[next];
    const size_t eq = kv.find('=');
    if (eq == std::string::npos)
      return Status::InvalidArgument("set: '" + kv + "' is not KEY=VALUE");
    const std::string key = kv.substr(0, eq);
    const std::string value = kv.substr(eq + 1);
    if (key == "delay") {
      auto d = wanbackup::ParseDuration(value, "ms");
      if (!d.ok()) return d.status().WithContext("delay");
      cmd.delay_ns = d->count();
    } else if (key == "rate") {
      auto r = wanbackup::ParseBitRate(value);
      if (!r.ok()) return r.status().WithContext("rate");
      cmd.rate_bps = *r;
    } else if (key == "queue") {
      auto q = wanbackup::ParseSize(value);
      if (!q.ok()) return q.status().WithContext("queue");
      cmd.queue_bytes = *q;
    } else if (key == "loss") {
      auto l = wanbackup::ParseFraction(value);
      if (!l.ok()) return l.status().WithContext("loss");
      cmd.loss = *l;
    } else {
      return Status::InvalidArgument("set: unknown key '" + key + "' (delay, rate, queue, loss)");
    }
  }
  return cmd;
}

void ApplySet(const Command& command, LinkParams* params) {
  if (command.delay_ns) params->delay_ns = *command.delay_ns;
  if (command.rate_bps) params->rate_bps = *command.rate_bps;
  if (command.queue_bytes) params->queue_bytes = *command.queue_bytes;
  if (command.loss) params->loss = *command.loss;
}

std::string FormatParams(const std::string& name, const LinkParams& p, int64_t now_ns) {
  char buf[256];
  const double blackhole_s =
      p.blackhole_until_ns > now_ns ? static_cast<double>(p.blackhole_until_ns - now_ns) / 1e9 : 0;
  std::snprintf(
      buf, sizeof buf, "%s delay_ns=%lld rate_bps=%llu queue_bytes=%llu loss=%.6f blackhole_s=%.3f",
      name.c_str(), static_cast<long long>(p.delay_ns), static_cast<unsigned long long>(p.rate_bps),
      static_cast<unsigned long long>(p.queue_bytes), p.loss, blackhole_s);
  return buf;
}

std::string FormatStats(const std::string& name, const DirectionStats& s) {
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "%s rx_packets=%llu rx_bytes=%llu tx_packets=%llu tx_bytes=%llu drop_loss=%llu "
      "drop_queue=%llu drop_blackhole=%llu drop_overflow=%llu tx_errors=%llu "
      "queued_bytes=%llu cpu_seconds=%.3f rx_frames=%llu tx_frames=%llu drop_malformed=%llu",
      name.c_str(), static_cast<unsigned long long>(s.rx_packets),
      static_cast<unsigned long long>(s.rx_bytes), static_cast<unsigned long long>(s.tx_packets),
      static_cast<unsigned long long>(s.tx_bytes), static_cast<unsigned long long>(s.drop_loss),
      static_cast<unsigned long long>(s.drop_queue),
      static_cast<unsigned long long>(s.drop_blackhole),
      static_cast<unsigned long long>(s.drop_overflow),
      static_cast<unsigned long long>(s.tx_errors), static_cast<unsigned long long>(s.queued_bytes),
      s.cpu_seconds, static_cast<unsigned long long>(s.rx_frames),
      static_cast<unsigned long long>(s.tx_frames),
      static_cast<unsigned long long>(s.drop_malformed));
  return buf;
}

}  // namespace wanem
