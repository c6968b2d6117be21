#include "repository/cache_refresh.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

using wanbackup::catalog::PackInfo;
using wanbackup::pipeline::CacheRefreshPlan;
using wanbackup::pipeline::ExaminedPacks;
using wanbackup::pipeline::FormatExaminedPacks;
using wanbackup::pipeline::ParseExaminedPacks;
using wanbackup::pipeline::PlanCacheRefresh;
using wanbackup::pipeline::StoredPack;
using Kind = CacheRefreshPlan::Kind;

namespace {

std::string Name(char c) {
  return std::string(32, c);
}

PackInfo Known(int64_t id, char c, uint64_t size) {
  PackInfo p;
  p.id = id;
  p.name = Name(c);
  p.size = size;
  return p;
}

StoredPack Stored(char c, uint64_t size) {
  StoredPack p;
  p.name = Name(c);
  p.size = size;
  return p;
}

}  // namespace

TEST_CASE("cache refresh plan: the same packs at the same sizes need nothing", "[cache]") {
  const CacheRefreshPlan plan = PlanCacheRefresh({Known(1, 'a', 100), Known(2, 'b', 200)},
                                                 {Stored('a', 100), Stored('b', 200)});
  CHECK(plan.kind == Kind::kFresh);
  CHECK(plan.added.empty());
  CHECK(plan.grown.empty());
}

TEST_CASE("cache refresh plan: new packs are indexed incrementally, in the store's order",
          "[cache]") {
  const CacheRefreshPlan plan = PlanCacheRefresh(
      {Known(1, 'a', 100)}, {Stored('a', 100), Stored('c', 300), Stored('b', 200)});
  REQUIRE(plan.kind == Kind::kIncremental);
  REQUIRE(plan.added.size() == 2);
  CHECK(plan.added[0].name == Name('c'));
  CHECK(plan.added[1].name == Name('b'));
  CHECK(plan.grown.empty());
}

TEST_CASE("cache refresh plan: a pack that grew is indexed from where the cache stopped",
          "[cache]") {
  const CacheRefreshPlan plan = PlanCacheRefresh({Known(1, 'a', 100), Known(7, 'b', 32)},
                                                 {Stored('a', 100), Stored('b', 900)});
  REQUIRE(plan.kind == Kind::kIncremental);
  CHECK(plan.added.empty());
  REQUIRE(plan.grown.size() == 1);
  CHECK(plan.grown[0].id == 7);
  CHECK(plan.grown[0].known_size == 32);
  CHECK(plan.grown[0].pack.size == 900);
}

TEST_CASE("cache refresh plan: a pack gone from the store (another host pruned) rebuilds whole",
          "[cache]") {
  const CacheRefreshPlan plan = PlanCacheRefresh({Known(1, 'a', 100), Known(2, 'b', 200)},
                                                 {Stored('b', 200), Stored('c', 300)});
  CHECK(plan.kind == Kind::kFull);
  CHECK_THAT(plan.why, Catch::Contains("gone"));
}

TEST_CASE("cache refresh plan: a smaller pack beside new ones rebuilds whole, alone it is fresh",
          "[cache]") {
  CHECK(PlanCacheRefresh({Known(1, 'a', 100)}, {Stored('a', 50), Stored('b', 10)}).kind ==
        Kind::kFull);
  CHECK(PlanCacheRefresh({Known(1, 'a', 100)}, {Stored('a', 50)}).kind == Kind::kFresh);
}

TEST_CASE("cache refresh plan: a cache that indexes no pack yet is rebuilt whole", "[cache]") {
  CHECK(PlanCacheRefresh({}, {Stored('a', 100)}).kind == Kind::kFull);
  CHECK(PlanCacheRefresh({}, {}).kind == Kind::kFresh);
}

TEST_CASE(
    "cache refresh plan: a pack read to its end before (left out, or a damaged last record) is "
    "not read again while it keeps that size",
    "[cache]") {
  const std::vector<PackInfo> known = {Known(1, 'a', 100)};
  const ExaminedPacks examined = {{Name('a'), 150}, {Name('x'), 40}};
  const CacheRefreshPlan same =
      PlanCacheRefresh(known, {Stored('a', 150), Stored('x', 40)}, examined);
  CHECK(same.kind == Kind::kFresh);
  const CacheRefreshPlan changed =
      PlanCacheRefresh(known, {Stored('a', 200), Stored('x', 50)}, examined);
  REQUIRE(changed.kind == Kind::kIncremental);
  REQUIRE(changed.grown.size() == 1);
  CHECK(changed.grown[0].known_size == 100);
  REQUIRE(changed.added.size() == 1);
  CHECK(changed.added[0].name == Name('x'));
}

TEST_CASE("cache refresh plan: the packs read to their end are kept as NAME:SIZE words",
          "[cache]") {
  const ExaminedPacks packs = {{Name('a'), 150}, {Name('b'), 32}};
  CHECK(ParseExaminedPacks(FormatExaminedPacks(packs)) == packs);
  CHECK(ParseExaminedPacks("").empty());
  CHECK(ParseExaminedPacks("junk " + Name('c') + ":x " + Name('d') + ":7") ==
        ExaminedPacks{{Name('d'), 7}});
}
