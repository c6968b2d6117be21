#include "control.h"

#include <catch2/catch.hpp>

using wanem::Command;
using wanem::ParseCommand;
using wanem::Which;

TEST_CASE("wanem control: set takes a direction and any of delay rate queue loss", "[wanem]") {
  auto c = ParseCommand("set ab delay=64ms rate=1gbit queue=4MiB loss=0.5%");
  REQUIRE(c.ok());
  CHECK(c->kind == Command::Kind::kSet);
  CHECK(c->which == Which::kAB);
  CHECK(*c->delay_ns == 64'000'000);
  CHECK(*c->rate_bps == 1'000'000'000);
  CHECK(*c->queue_bytes == 4u << 20);
  CHECK(*c->loss == Approx(0.005));
  auto both = ParseCommand("set delay=8");  // bare delay numbers are milliseconds
  REQUIRE(both.ok());
  CHECK(both->which == Which::kBoth);
  CHECK(*both->delay_ns == 8'000'000);
  CHECK_FALSE(both->rate_bps.has_value());
}

TEST_CASE("wanem control: blackhole takes a duration and 0 lifts it", "[wanem]") {
  auto c = ParseCommand("blackhole ba 2.5s");
  REQUIRE(c.ok());
  CHECK(c->kind == Command::Kind::kBlackhole);
  CHECK(c->which == Which::kBA);
  CHECK(c->blackhole_ns == 2'500'000'000);
  CHECK(ParseCommand("blackhole 0")->blackhole_ns == 0);
}

TEST_CASE("wanem control: bad commands are refused with a reason", "[wanem]") {
  for (const char* bad : {"", "fly", "set", "set delay", "set speed=1", "set loss=200%",
                          "blackhole", "blackhole ab 1s 2s", "stats now"}) {
    INFO(bad);
    auto c = ParseCommand(bad);
    REQUIRE_FALSE(c.ok());
    CHECK_FALSE(c.status().message().empty());
  }
}
