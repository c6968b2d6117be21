// Checked reads of integer fields from JSON the repository stored (config.json, sealed snapshot
// and forget records). nlohmann's get<int>() converts a float with static_cast, which is
// undefined behaviour when the value is out of range, and wraps a negative number into an
// unsigned type; a tampered or damaged file must be a Corruption, never either. Header-only,
// stateless, thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace wanbackup::pipeline::internal {

// A field that is present but not an integer of the asked type. Callers catch it next to
// nlohmann::json::exception and report both as Corruption.
class JsonFieldError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// j[key] as T, if it is a JSON integer (not a float, string or bool) that T can hold exactly.
// Throws nlohmann::json::out_of_range when the key is missing, JsonFieldError otherwise.
template <typename T>
T IntField(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  const auto bad = [key](const char* why) {
    return JsonFieldError(std::string("field '") + key + "' " + why);
  };
  if (v.is_number_unsigned()) {
    const auto u = v.get<nlohmann::json::number_unsigned_t>();
    if (u > static_cast<std::make_unsigned_t<T>>(std::numeric_limits<T>::max())) {
      throw bad("is out of range");
    }
    return static_cast<T>(u);
  }
  if (v.is_number_integer()) {
    const auto s = v.get<nlohmann::json::number_integer_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (s < 0) throw bad("is negative");
      if (static_cast<uint64_t>(s) > std::numeric_limits<T>::max()) throw bad("is out of range");
    } else {
      if (s < std::numeric_limits<T>::min() || s > std::numeric_limits<T>::max()) {
        throw bad("is out of range");
      }
    }
    return static_cast<T>(s);
  }
  throw bad("is not an integer");
}

}  // namespace wanbackup::pipeline::internal
