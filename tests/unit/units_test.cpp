#include "common/units.h"

#include <catch2/catch.hpp>

using namespace wanbackup;
using namespace std::chrono_literals;

TEST_CASE("sizes: binary suffixes are powers of 1024 and SI ones with B are powers of 1000",
          "[units]") {
  CHECK(ParseSize("4096").value() == 4096);
  CHECK(ParseSize("4K").value() == 4096);
  CHECK(ParseSize("4KiB").value() == 4096);
  CHECK(ParseSize("4m").value() == 4u << 20);
  CHECK(ParseSize("1.5G").value() == 3ull << 29);
  CHECK(ParseSize("2T").value() == 2ull << 40);
  CHECK(ParseSize("4kB").value() == 4000);
  CHECK(ParseSize("4MB").value() == 4'000'000);
  CHECK(ParseSize(" 8 MiB ").value() == 8u << 20);
}

TEST_CASE("sizes: malformed or negative or fractional-byte or unknown units are refused",
          "[units]") {
  for (const char* bad : {"", "M", "-4K", "4X", "4Kb2", "1.5", "0.3K", "99999999999P"}) {
    INFO(bad);
    Result<uint64_t> r = ParseSize(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
  }
}

TEST_CASE("durations: units from ns to h and a default unit for bare numbers", "[units]") {
  CHECK(ParseDuration("250ns").value() == 250ns);
  CHECK(ParseDuration("20us").value() == 20us);
  CHECK(ParseDuration("20ms").value() == 20ms);
  CHECK(ParseDuration("1.5s").value() == 1500ms);
  CHECK(ParseDuration("2m").value() == 120s);
  CHECK(ParseDuration("1h").value() == 3600s);
  CHECK(ParseDuration("30").value() == 30s);
  CHECK(ParseDuration("64", "ms").value() == 64ms);
  CHECK_FALSE(ParseDuration("5 parsecs").ok());
  CHECK_FALSE(ParseDuration("-1s").ok());
}

TEST_CASE("bit rates: tc-style SI units where 0 and unlimited mean no limit", "[units]") {
  CHECK(ParseBitRate("1gbit").value() == 1'000'000'000);
  CHECK(ParseBitRate("100mbit").value() == 100'000'000);
  CHECK(ParseBitRate("56kbit").value() == 56'000);
  CHECK(ParseBitRate("unlimited").value() == 0);
  CHECK(ParseBitRate("0").value() == 0);
  CHECK_FALSE(ParseBitRate("1gb").ok());
}

TEST_CASE("fractions: percent or plain but never above one", "[units]") {
  CHECK(ParseFraction("0.5%").value() == Approx(0.005));
  CHECK(ParseFraction("0.25").value() == Approx(0.25));
  CHECK(ParseFraction("5e-3").value() == Approx(0.005));
  CHECK_FALSE(ParseFraction("150%").ok());
  CHECK_FALSE(ParseFraction("half").ok());
}

TEST_CASE("formatting: bytes in binary units and rates in decimal MB/s and compact durations",
          "[units]") {
  CHECK(FormatBytes(512) == "512 B");
  CHECK(FormatBytes(4u << 20) == "4.00 MiB");
  CHECK(FormatBytes(3ull << 29) == "1.50 GiB");
  CHECK(FormatRate(118.4e6) == "118.4 MB/s");
  CHECK(FormatDuration(20ms) == "20.0ms");
  CHECK(FormatDuration(200s) == "3m20s");
}
