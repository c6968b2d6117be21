// Golden files (tests/cli/golden/): exact expected output, compared byte for byte, and
// rewritten instead when the environment has WB_UPDATE_GOLDEN=1 (scripts/update-golden).
// JSON is compared by its shape: every key, every type and every stable value, with values that
// change from run to run (times, rates, memory, host names) replaced by "<number>" or
// "<string>" and the test's temporary directory by $TMP. Not thread-safe (Catch assertions).
#pragma once

#include <set>
#include <string>

namespace wanbackup::testing {

// Compares `actual` with the golden file `name` (a path under tests/cli/golden/), or rewrites it.
void CheckGolden(const std::string& name, const std::string& actual);

// `json` (a command's output) normalised and pretty-printed. Keys whose values change from run
// to run in every output are built in; `volatile_keys` adds keys for this output only.
std::string JsonShape(const std::string& json, const std::string& tmp,
                      const std::set<std::string>& volatile_keys = {});

}  // namespace wanbackup::testing
