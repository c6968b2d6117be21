#include "repository/head_record.h"

#include <nlohmann/json.hpp>

#include "repository/internal/json_fields.h"

namespace wanbackup::pipeline {
namespace {

constexpr int kHeadRecordVersion = 1;

Status Malformed(const std::string& why) {
  return Status::Corruption("a head record is malformed: " + why);
}

}  // namespace

std::string EncodeHeadRecord(const HeadRecord& r) {
  nlohmann::json snapshots = nlohmann::json::array();
  for (const HeadEntry& e : r.snapshots)
    snapshots.push_back({{"id", e.id}, {"record", ToHex(e.record.data(), e.record.size())}});
  const nlohmann::json j = {{"version", kHeadRecordVersion},
                            {"repository_id", r.repository_id},
                            {"counter", r.counter},
                            {"written_unix_ms", r.written_unix_ms},
                            {"snapshots", snapshots}};
  return j.dump();
}

Result<HeadRecord> DecodeHeadRecord(const uint8_t* data, size_t size) {
  if (size > kMaxHeadRecordSize) return Status::Corruption("a head record is too large");
  HeadRecord r;
  try {
    const auto j = nlohmann::json::parse(data, data + size);
    if (!j.is_object()) return Malformed("not an object");
    const int version = internal::IntField<int>(j, "version");
    if (version != kHeadRecordVersion) {
      return Status::Unsupported("head record version " + std::to_string(version) + " is unknown");
    }
    r.repository_id = j.at("repository_id").get<std::string>();
    r.counter = internal::IntField<uint64_t>(j, "counter");
    if (r.counter == 0) return Malformed("counter 0");
    r.written_unix_ms = internal::IntField<int64_t>(j, "written_unix_ms");
    const auto& snapshots = j.at("snapshots");
    if (!snapshots.is_array()) return Malformed("'snapshots' is not a list");
    for (const auto& s : snapshots) {
      HeadEntry e;
      e.id = internal::IntField<int64_t>(s, "id");
      if (e.id <= 0 || (!r.snapshots.empty() && e.id <= r.snapshots.back().id)) {
        return Malformed("snapshot ids are not positive and ascending");
      }
      if (!FromHex(s.at("record").get<std::string>(), e.record.data(), e.record.size())) {
        return Malformed("snapshot " + std::to_string(e.id) + " names no record digest");
      }
      r.snapshots.push_back(e);
    }
  } catch (const nlohmann::json::exception& e) {
    return Malformed(e.what());
  } catch (const internal::JsonFieldError& e) {
    return Malformed(e.what());
  }
  return r;
}

std::string DescribeSetDifference(const std::vector<HeadEntry>& head,
                                  const std::vector<HeadEntry>& set) {
  size_t i = 0, j = 0;
  while (i < head.size() || j < set.size()) {
    if (j == set.size() || (i < head.size() && head[i].id < set[j].id)) {
      return "snapshot " + std::to_string(head[i].id) + " is missing from the catalog";
    }
    if (i == head.size() || set[j].id < head[i].id) {
      return "the catalog lists snapshot " + std::to_string(set[j].id) +
             ", which the head does not";
    }
    if (head[i].record != set[j].record) {
      return "snapshot " + std::to_string(head[i].id) +
             " in the catalog is not the snapshot the head names";
    }
    ++i;
    ++j;
  }
  return "";
}

}  // namespace wanbackup::pipeline
