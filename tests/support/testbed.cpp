#include "support/testbed.h"

#include <fstream>

#include <catch2/catch.hpp>

namespace wanbackup::testing {

const Testbed& Testbed::Get() {
  static const Testbed* bed = [] {
    auto* t = new Testbed;
    t->dir = WB_TESTBED_DIR;
    t->wanbackup = WB_WANBACKUP_BIN;
    for (const char* file : {"/wanlab.env", "/testbed.env"}) {
      std::ifstream in(t->dir + file);
      for (std::string line; std::getline(in, line);) {
        const size_t eq = line.find('=');
        if (eq != std::string::npos) t->vars[line.substr(0, eq)] = line.substr(eq + 1);
      }
    }
    t->netns_a = t->vars["NETNS_A"];
    t->netns_b = t->vars["NETNS_B"];
    t->addr_b = t->vars["ADDR_B"];
    t->wanem = t->vars["WANEM"];
    t->wanem_control = t->vars["WANEM_CONTROL"];
    return t;
  }();
  INFO("the testbed fixture is not up: run the suite with ctest (tests/testbed.sh up " << bed->dir
                                                                                       << ")");
  REQUIRE_FALSE(bed->vars.count("TESTBED_READY") == 0);
  return *bed;
}

std::string Testbed::Var(const std::string& key) const {
  auto it = vars.find(key);
  INFO("testbed variable " << key);
  REQUIRE(it != vars.end());
  return it->second;
}

std::string Testbed::Wan(const std::string& command) const {
  std::vector<std::string> argv = {wanem, "ctl", wanem_control};
  size_t start = 0;
  while (start < command.size()) {
    size_t end = command.find(' ', start);
    if (end == std::string::npos) end = command.size();
    if (end > start) argv.push_back(command.substr(start, end - start));
    start = end + 1;
  }
  RunResult r = Run(argv);
  INFO("wanem ctl " << command << ": " << r.err);
  REQUIRE(r.exit_code == 0);
  return r.out;
}

RunResult Testbed::Wanbackup(const std::vector<std::string>& args, RunOptions options) const {
  std::vector<std::string> argv = {wanbackup};
  argv.insert(argv.end(), args.begin(), args.end());
  return InSiteA(argv, std::move(options));
}

RunResult Testbed::InSiteA(const std::vector<std::string>& argv, RunOptions options) const {
  options.netns = netns_a;
  return Run(argv, options);
}

LinkScope::LinkScope() {
  Testbed::Get().Wan("blackhole 0");
  Testbed::Get().Wan("set delay=0ms rate=unlimited loss=0 queue=2MiB");
}

LinkScope::~LinkScope() {
  const Testbed& bed = Testbed::Get();
  // No REQUIRE in a destructor: a failure here shows up in the next test's LinkScope().
  Run({bed.wanem, "ctl", bed.wanem_control, "blackhole", "0"});
  Run({bed.wanem, "ctl", bed.wanem_control, "set", "delay=0ms", "rate=unlimited", "loss=0",
       "queue=2MiB"});
}

}  // namespace wanbackup::testing
