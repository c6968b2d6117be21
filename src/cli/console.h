// Messages for people: errors and warnings on stderr as one line each, prefixed "wanbackup:".
// Never pass a secret to these. Thread-safe (each call writes one line atomically).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace wanbackup::cli {

void PrintError(std::string_view message);
void PrintWarning(std::string_view message);
// Informational line on stderr, shown unless --quiet.
void PrintInfo(std::string_view message);
void SetQuiet(bool quiet);

}  // namespace wanbackup::cli
