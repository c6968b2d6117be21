// JSON as the CLI prints or records it. Paths, IQNs and error messages are bytes, not always
// UTF-8; nlohmann::json throws on invalid UTF-8, so every dump goes through here, where such a
// byte becomes U+FFFD instead.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace wanbackup::cli {

inline std::string JsonText(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Whether the command printed its JSON document (Main prints one for a failure that did not).
inline bool& JsonPrinted() {
  static bool printed = false;
  return printed;
}

// Where the command's JSON goes: stdout, or stderr when stdout carries the data (restore or
// copy to "-"). Set by the command before it can fail; Main's failure document follows it.
inline std::FILE*& JsonStream() {
  static std::FILE* stream = stdout;
  return stream;
}

// One JSON document and a newline on JsonStream().
inline void OutputJson(const nlohmann::json& j, int indent = -1) {
  std::fprintf(JsonStream(), "%s\n", JsonText(j, indent).c_str());
  JsonPrinted() = true;
}

}  // namespace wanbackup::cli
