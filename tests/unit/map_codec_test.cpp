#include "catalog/map_codec.h"

#include <random>

#include <catch2/catch.hpp>

using wanbackup::StatusCode;
using wanbackup::catalog::DecodeChunkMap;
using wanbackup::catalog::EncodeChunkMap;

TEST_CASE("chunk map: a first snapshot of 4 Mi chunks takes a handful of bytes", "[catalog]") {
  std::vector<int64_t> ids(4u << 20);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<int64_t>(i) + 1;
  const std::string encoded = EncodeChunkMap(ids);
  CHECK(encoded.size() < 16);
  CHECK(DecodeChunkMap(encoded, ids.size()).value() == ids);
}

TEST_CASE("chunk map: zeros, repeats and scattered changes round-trip", "[catalog]") {
  std::mt19937_64 rng(5);
  std::vector<int64_t> ids(100000);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<int64_t>(i) + 1;
  for (int k = 0; k < 1000; ++k)
    ids[rng() % ids.size()] = static_cast<int64_t>(rng() % 200000);
  std::fill(ids.begin() + 5000, ids.begin() + 9000, 0);  // all-zero chunks
  const std::string encoded = EncodeChunkMap(ids);
  CHECK(encoded.size() < 12 * 1000 + 64);  // about a dozen bytes per change
  CHECK(DecodeChunkMap(encoded, ids.size()).value() == ids);
}

TEST_CASE("chunk map: truncated or miscounted input is corruption, not a crash", "[catalog]") {
  std::vector<int64_t> ids = {5, 6, 7, 0, 0, 9};
  const std::string encoded = EncodeChunkMap(ids);
  CHECK(DecodeChunkMap(encoded, 7).status().code() == StatusCode::kCorruption);
  CHECK(DecodeChunkMap(encoded.substr(0, encoded.size() - 1), 6).status().code() ==
        StatusCode::kCorruption);
  CHECK(DecodeChunkMap(std::string("\xff\xff\xff", 3), 6).status().code() ==
        StatusCode::kCorruption);
  CHECK(DecodeChunkMap("", 0).value().empty());
}
