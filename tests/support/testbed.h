// The integration testbed that the CTest fixture `testbed` brings up (tests/testbed.sh): the
// emulated WAN (site A initiator, site B target) and the reference target with its LUNs.
// Tests read its description from the state directory; they may change the link (delay, loss,
// blackhole) and must restore it (LinkScope). Integration tests hold the `testbed` resource lock,
// so they never run concurrently.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "support/subprocess.h"

namespace wanbackup::testing {

struct Testbed {
  std::string dir;
  std::string netns_a, netns_b;
  std::string addr_b;
  std::string wanem, wanem_control;
  std::string wanbackup;                    // the binary under test
  std::map<std::string, std::string> vars;  // everything in testbed.env

  // Loads the description; fails the test (Catch REQUIRE) when the fixture is not up.
  static const Testbed& Get();

  std::string Var(const std::string& key) const;
  // Sends a control command to the emulator; REQUIREs success; returns its output.
  std::string Wan(const std::string& command) const;
  // Runs wanbackup with `args` in site A.
  RunResult Wanbackup(const std::vector<std::string>& args, RunOptions options = {}) const;
  // Runs any program in site A.
  RunResult InSiteA(const std::vector<std::string>& argv, RunOptions options = {}) const;
};

// Puts the link back to delay 0, no loss, no limit, no blackhole when the scope ends.
class LinkScope {
 public:
  LinkScope();
  ~LinkScope();
  LinkScope(const LinkScope&) = delete;
  LinkScope& operator=(const LinkScope&) = delete;
};

}  // namespace wanbackup::testing
