#include "support/golden.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace wanbackup::testing {
namespace {

const std::string kGoldenDir = WB_SOURCE_DIR "/tests/cli/golden";

bool Updating() {
  const char* v = std::getenv("WB_UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Values that differ from run to run: replaced by "<number>" / "<string>" wherever the key
// appears, at any depth.
const std::set<std::string> kVolatileKeys = {
    "seconds",
    "bytes_per_second",
    "steady_bytes_per_second",
    "max_rss_bytes",
    "peak_buffer_bytes",
    "rtt_ms",
    "started_unix_ms",
    "finished_unix_ms",
    "hostname",
    "old_catalog",  // catalog.db.damaged-TIME
    // The size of the sealed snapshot record, which holds the host name, times and paths.
    "bytes_checked",
};

// Objects whose every value is volatile (their keys are pinned).
const std::set<std::string> kVolatileObjects = {"cpu_seconds"};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// Each line number where `a` and `b` differ, with both lines ("<no line>" where one text is
// shorter; a carriage return shown as \r), at most kMostDifferences of them: one inserted line
// makes every later line differ.
constexpr int kMostDifferences = 20;
std::string DifferingLines(const std::string& a, const std::string& b) {
  const std::vector<std::string> la = Lines(a), lb = Lines(b);
  const auto show = [](const std::vector<std::string>& lines, size_t i) {
    if (i >= lines.size()) return std::string("<no line>");
    std::string line;
    for (const char ch : lines[i])
      line += ch == '\r' ? std::string("\\r") : std::string(1, ch);
    return line;
  };
  std::string out;
  int shown = 0;
  for (size_t i = 0; i < std::max(la.size(), lb.size()); ++i) {
    if (i < la.size() && i < lb.size() && la[i] == lb[i]) continue;
    if (++shown > kMostDifferences) {
      out.append("(more lines differ)\n");
      break;
    }
    const std::string number = std::to_string(i + 1) + ": ";
    out.append(number).append(show(la, i)).append("\n").append(number).append(show(lb, i));
    out.append("\n");
  }
  if (out.empty() && a != b)
    out = "every line is the same: the texts differ in their final newline\n";
  return out;
}

std::string Placeholder(const nlohmann::json& value) {
  return value.is_number() ? "<number>" : "<string>";
}

void Normalise(nlohmann::json& j, const std::string& tmp,
               const std::set<std::string>& volatile_keys) {
  if (j.is_object()) {
    for (auto& [key, value] : j.items()) {
      if ((kVolatileKeys.count(key) != 0 || volatile_keys.count(key) != 0) && !value.is_null()) {
        value = Placeholder(value);
      } else if (kVolatileObjects.count(key) != 0 && value.is_object()) {
        for (auto& inner : value)
          inner = Placeholder(inner);
      } else {
        Normalise(value, tmp, volatile_keys);
      }
    }
  } else if (j.is_array()) {
    for (auto& value : j)
      Normalise(value, tmp, volatile_keys);
  } else if (j.is_string()) {
    std::string s = j.get<std::string>();
    for (size_t at = s.find(tmp); at != std::string::npos; at = s.find(tmp, at))
      s.replace(at, tmp.size(), "$TMP");
    j = s;
  }
}

}  // namespace

// Compares `actual` with the golden file `name` (under tests/cli/golden/), or rewrites it.
void CheckGolden(const std::string& name, const std::string& actual) {
  const std::string path = kGoldenDir + "/" + name;
  if (Updating()) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  INFO("golden file " << path << " (scripts/update-golden rewrites it after a deliberate change)");
  REQUIRE(std::filesystem::exists(path));
  const std::string expected = ReadFile(path);
  // Only the lines that differ, not both texts whole: a CI log may show just the start of a
  // long failure.
  INFO("differing lines (golden, then actual):\n" << DifferingLines(expected, actual));
  const bool same = expected == actual;
  CHECK(same);
}

std::string JsonShape(const std::string& json, const std::string& tmp,
                      const std::set<std::string>& volatile_keys) {
  INFO("JSON: " << json);
  nlohmann::json j = nlohmann::json::parse(json);
  Normalise(j, tmp, volatile_keys);
  return j.dump(2) + "\n";
}

}  // namespace wanbackup::testing
