// How CLI verbs plug in: each cmd_<verb>.cpp has an options struct, a plain Run<Verb>(options),
// and Register<Verb>(app, runner), which adds the subcommand and, when the command line selects
// it, stores in *runner the call to make once parsing is over. app.cpp lists them in one table.
#pragma once

#include <functional>

#include "common/status.h"

namespace CLI {
class App;
}

namespace wanbackup::cli {

using Runner = std::function<Status()>;
using RegisterFn = void (*)(CLI::App& app, Runner* runner);

void RegisterCopy(CLI::App& app, Runner* runner);
void RegisterForget(CLI::App& app, Runner* runner);
void RegisterInit(CLI::App& app, Runner* runner);
void RegisterJobs(CLI::App& app, Runner* runner);
void RegisterKey(CLI::App& app, Runner* runner);
void RegisterMigrate(CLI::App& app, Runner* runner);
void RegisterMount(CLI::App& app, Runner* runner);
void RegisterProbe(CLI::App& app, Runner* runner);
void RegisterPrune(CLI::App& app, Runner* runner);
void RegisterRepair(CLI::App& app, Runner* runner);
void RegisterReplicas(CLI::App& app, Runner* runner);
void RegisterReplicate(CLI::App& app, Runner* runner);
void RegisterRestore(CLI::App& app, Runner* runner);
void RegisterRun(CLI::App& app, Runner* runner);
void RegisterSchedule(CLI::App& app, Runner* runner);
void RegisterSnapshot(CLI::App& app, Runner* runner);
void RegisterSnapshots(CLI::App& app, Runner* runner);
void RegisterTrust(CLI::App& app, Runner* runner);
void RegisterVerify(CLI::App& app, Runner* runner);

}  // namespace wanbackup::cli
