// Parsing and printing of sizes, durations and rates as users type and read them.
// Pure functions; thread-safe.
//
// Sizes:     "4096", "4K" = "4KiB" = 4096, "4M"/"4MiB", "1G", "2T"; SI with a B: "4kB" = 4000,
//            "4MB" = 4000000. Case of the prefix letter does not matter; "b" is never bytes.
// Durations: "250ns", "20us", "20ms", "1.5s", "2m", "1h"; a bare number uses the default unit.
// Bit rates: "1gbit", "100mbit", "56kbit", "1000000bit" (SI, bits per second, like tc);
//            "0" or "unlimited" means no limit (returned as 0).
// Byte rates (--limit-rate): a size per second, "20M" = "20M/s" = "20MiB/s" = 20 MiB/s,
//            "20MB/s" = 20,000,000 B/s, or a bit rate as above ("160mbit" = 20 MB/s);
//            "0" or "unlimited" means no limit (returned as 0).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace wanbackup {

Result<uint64_t> ParseSize(std::string_view text);
Result<std::chrono::nanoseconds> ParseDuration(std::string_view text,
                                               std::string_view default_unit = "s");
Result<uint64_t> ParseBitRate(std::string_view text);
// Bytes per second (see above).
Result<uint64_t> ParseByteRate(std::string_view text);
// A share given as "0.5%", "0.005" or "5e-3"; must lie within [0, 1].
Result<double> ParseFraction(std::string_view text);

// A duration as seconds with a fraction, for rates and summaries.
inline double Seconds(std::chrono::nanoseconds d) {
  return std::chrono::duration<double>(d).count();
}

// "4.00 MiB", "512 B", "1.50 GiB".
std::string FormatBytes(uint64_t bytes);
// Decimal megabytes per second, the unit storage people compare: "118.4 MB/s".
std::string FormatRate(double bytes_per_second);
// "250 µs" style without the micro sign: "250us", "20.0ms", "1.50s", "3m20s", "2h05m".
std::string FormatDuration(std::chrono::nanoseconds d);
// A time for people: local time, "2026-11-25 10:30:00".
std::string LocalTime(int64_t unix_ms);

}  // namespace wanbackup
