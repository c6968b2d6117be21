#include "common/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>

namespace wanbackup {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

// Splits "12.5ms" into 12.5 and "ms". Fails on an empty or malformed number.
bool SplitNumber(std::string_view text, double* number, std::string_view* unit) {
  text = Trim(text);
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' ||
                             ((text[i] == 'e' || text[i] == 'E') && i > 0 && i + 1 < text.size() &&
                              (std::isdigit(static_cast<unsigned char>(text[i + 1])) ||
                               text[i + 1] == '-' || text[i + 1] == '+')) ||
                             ((text[i] == '-' || text[i] == '+') && i > 0 &&
                              (text[i - 1] == 'e' || text[i - 1] == 'E')))) {
    ++i;
  }
  if (i == 0) return false;
  std::string digits(text.substr(0, i));
  char* end = nullptr;
  double value = std::strtod(digits.c_str(), &end);
  if (end != digits.c_str() + digits.size() || !std::isfinite(value) || value < 0) return false;
  *number = value;
  *unit = Trim(text.substr(i));
  return true;
}

}  // namespace

Result<uint64_t> ParseSize(std::string_view text) {
  double number = 0;
  std::string_view unit_view;
  if (!SplitNumber(text, &number, &unit_view)) {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not a size (examples: 4096, 512K, 4MiB, 2G)");
  }
  const std::string unit = Lower(unit_view);
  double multiplier = 0;
  if (unit.empty() || unit == "b") {
    multiplier = 1;
  } else {
    static constexpr std::string_view kPrefixes = "kmgtp";
    const size_t power = kPrefixes.find(unit[0]);
    const std::string_view rest = std::string_view(unit).substr(1);
    if (power != std::string_view::npos) {
      // A trailing B alone means SI ("kB", "MB"); nothing, "i" or "iB" means binary ("K", "MiB").
      const bool si = (rest == "b");
      const bool binary = rest.empty() || rest == "i" || rest == "ib";
      if (si) multiplier = std::pow(1000.0, static_cast<double>(power + 1));
      if (binary) multiplier = std::pow(1024.0, static_cast<double>(power + 1));
    }
  }
  if (multiplier == 0) {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "': unknown size unit (use K, M, G, T, KiB, MiB, kB, MB, ...)");
  }
  const double bytes = number * multiplier;
  if (bytes > static_cast<double>(std::numeric_limits<uint64_t>::max()) / 2) {
    return Status::InvalidArgument("'" + std::string(text) + "' is too large");
  }
  if (bytes != std::floor(bytes)) {
    return Status::InvalidArgument("'" + std::string(text) + "' is not a whole number of bytes");
  }
  return static_cast<uint64_t>(bytes);
}

Result<std::chrono::nanoseconds> ParseDuration(std::string_view text,
                                               std::string_view default_unit) {
  double number = 0;
  std::string_view unit_view;
  if (!SplitNumber(text, &number, &unit_view)) {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not a duration (examples: 20ms, 1.5s, 250us, 2m)");
  }
  std::string unit = Lower(unit_view.empty() ? default_unit : unit_view);
  double ns_per_unit = 0;
  if (unit == "ns")
    ns_per_unit = 1;
  else if (unit == "us")
    ns_per_unit = 1e3;
  else if (unit == "ms")
    ns_per_unit = 1e6;
  else if (unit == "s" || unit == "sec")
    ns_per_unit = 1e9;
  else if (unit == "m" || unit == "min")
    ns_per_unit = 60e9;
  else if (unit == "h")
    ns_per_unit = 3600e9;
  if (ns_per_unit == 0) {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "': unknown duration unit (use ns, us, ms, s, m, h)");
  }
  const double ns = number * ns_per_unit;
  if (ns > 1e18) return Status::InvalidArgument("'" + std::string(text) + "' is too long");
  return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(ns)));
}

Result<uint64_t> ParseBitRate(std::string_view text) {
  const std::string lowered = Lower(Trim(text));
  if (lowered == "unlimited" || lowered == "0") return uint64_t{0};
  double number = 0;
  std::string_view unit_view;
  if (!SplitNumber(text, &number, &unit_view)) {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not a bit rate (examples: 1gbit, 100mbit, unlimited)");
  }
  const std::string unit = Lower(unit_view);
  double multiplier = 0;
  if (unit == "bit" || unit == "bps")
    multiplier = 1;
  else if (unit == "kbit")
    multiplier = 1e3;
  else if (unit == "mbit")
    multiplier = 1e6;
  else if (unit == "gbit")
    multiplier = 1e9;
  else if (unit == "tbit")
    multiplier = 1e12;
  if (multiplier == 0) {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "': unknown rate unit (use bit, kbit, mbit, gbit)");
  }
  return static_cast<uint64_t>(std::llround(number * multiplier));
}

Result<uint64_t> ParseByteRate(std::string_view text) {
  std::string lowered = Lower(Trim(text));
  if (lowered == "unlimited" || lowered == "0") return uint64_t{0};
  const auto bad = [&text] {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not a rate (examples: 20M = 20 MiB/s, 20MB/s, 160mbit, "
                                   "unlimited)");
  };
  if (lowered.size() > 3 && lowered.compare(lowered.size() - 3, 3, "bit") == 0) {
    Result<uint64_t> bits = ParseBitRate(lowered);
    if (!bits.ok()) return bad();
    return *bits / 8;
  }
  if (lowered.size() > 2 && lowered.compare(lowered.size() - 2, 2, "/s") == 0) {
    lowered.resize(lowered.size() - 2);
  }
  const std::string_view size_text = Trim(text).substr(0, lowered.size());
  if (size_text.size() >= 2 && size_text.back() == 'b' &&
      std::isalpha(static_cast<unsigned char>(size_text[size_text.size() - 2]))) {
    // "20Mb" reads as megabits to many and as megabytes to ParseSize: make them say which.
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is ambiguous: write 20MB/s for bytes or 160mbit for bits");
  }
  Result<uint64_t> bytes = ParseSize(size_text);
  if (!bytes.ok()) return bad();
  return *bytes;
}

Result<double> ParseFraction(std::string_view text) {
  std::string_view trimmed = Trim(text);
  const bool percent = !trimmed.empty() && trimmed.back() == '%';
  if (percent) trimmed.remove_suffix(1);
  double number = 0;
  std::string_view unit;
  if (!SplitNumber(trimmed, &number, &unit) || !unit.empty()) {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not a fraction (examples: 0.5%, 0.005)");
  }
  if (percent) number /= 100.0;
  if (number > 1.0) {
    return Status::InvalidArgument("'" + std::string(text) + "' is more than 100%");
  }
  return number;
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", value, kUnits[unit]);
  return buf;
}

std::string FormatRate(double bytes_per_second) {
  char buf[32];
  if (bytes_per_second >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f GB/s", bytes_per_second / 1e9);
  } else if (bytes_per_second >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f MB/s", bytes_per_second / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f kB/s", bytes_per_second / 1e3);
  }
  return buf;
}

std::string FormatDuration(std::chrono::nanoseconds d) {
  const double ns = static_cast<double>(d.count());
  char buf[32];
  if (ns < 1e3) {
    std::snprintf(buf, sizeof buf, "%.0fns", ns);
  } else if (ns < 1e6) {
    std::snprintf(buf, sizeof buf, "%.0fus", ns / 1e3);
  } else if (ns < 1e9) {
    std::snprintf(buf, sizeof buf, "%.1fms", ns / 1e6);
  } else if (ns < 60e9) {
    std::snprintf(buf, sizeof buf, "%.2fs", ns / 1e9);
  } else if (ns < 3600e9) {
    const int64_t s = std::llround(ns / 1e9);
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    const int64_t m = std::llround(ns / 60e9);
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(m / 60),
                  static_cast<long long>(m % 60));
  }
  return buf;
}

std::string LocalTime(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace wanbackup
