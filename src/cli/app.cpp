#include "cli/app.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/exit_codes.h"
#include "cli/internal/json_text.h"
#include "common/cancel.h"
#include "common/version.h"
#include "repository/primitives.h"

namespace wanbackup::cli {
namespace {

// Every verb, in the order --help lists them.
constexpr RegisterFn kCommands[] = {
    RegisterInit,      RegisterSnapshot, RegisterSnapshots, RegisterRestore, RegisterMount,
    RegisterReplicate, RegisterReplicas, RegisterVerify,    RegisterForget,  RegisterPrune,
    RegisterRun,       RegisterJobs,     RegisterSchedule,  RegisterKey,     RegisterRepair,
    RegisterMigrate,   RegisterTrust,    RegisterProbe,     RegisterCopy,
};

extern "C" void OnTerminationSignal(int signo) {
  if (CancellationRequested()) {
    // Second signal: the user insists. Default action, now.
    ::signal(signo, SIG_DFL);
    ::raise(signo);
    return;
  }
  RequestCancellation();
}

void InstallSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnTerminationSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a closed pipe becomes an EPIPE error we report
}

// The version, then which library computes the per-chunk crypto (repository/primitives.h).
std::string VersionText() {
  namespace primitives = pipeline::primitives;
  const std::string sodium = primitives::Describe(primitives::Implementation::kLibsodium);
  return std::string("wanbackup ") + kVersion + " (" + kGitCommit + ")\nkeyed BLAKE2b and " +
         "XChaCha20-Poly1305: " + primitives::Describe(primitives::Active()) +
         "; keys and passphrases: " + sodium;
}

// "probe" when the failed parse had reached a subcommand, for the hint.
std::string HelpHint(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {
    return " (see 'wanbackup " + sub->get_name() + " --help')";
  }
  return " (see 'wanbackup --help')";
}

// The command that ran ("key change" for a nested one), and whether it was given --json.
std::pair<std::string, bool> ChosenCommand(const CLI::App& app) {
  std::string name;
  bool json = false;
  for (const CLI::App* at = &app; !at->get_subcommands().empty();) {
    at = at->get_subcommands().front();
    name += (name.empty() ? "" : " ") + at->get_name();
    const CLI::Option* flag = at->get_option_no_throw("--json");
    json = flag != nullptr && flag->count() > 0;
  }
  return {name, json};
}

}  // namespace

int Main(int argc, char** argv) {
  // Before any secret is read: no core dump, and no ptrace or /proc/PID/mem access by other
  // processes of the same user (root keeps them). docs/threat-model.md.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  CLI::App app("wanbackup: back up and replicate iSCSI disks over long-distance links",
               "wanbackup");
  app.set_version_flag("--version", VersionText(), "print the version and exit");
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "print only errors and the requested output");
  app.require_subcommand(1);
  app.fallthrough();
  app.footer("\n" + ExitStatusHelp() +
             "\nRun 'wanbackup COMMAND --help' for a command's options and examples.");

  Runner runner;
  for (RegisterFn register_fn : kCommands)
    register_fn(app, &runner);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // "wanbackup frobnicate": CLI11 only says a subcommand is required; name the culprit.
    if (argc > 1 && argv[1][0] != '-' && app.get_subcommands().empty()) {
      std::string known;
      for (const CLI::App* sub : app.get_subcommands({})) {
        known += (known.empty() ? "" : ", ") + sub->get_name();
      }
      PrintError("unknown command '" + std::string(argv[1]) + "' (commands: " + known +
                 "; see 'wanbackup --help')");
      return static_cast<int>(ExitCode::kUsage);
    }
    std::string what = e.what();
    if (!what.empty() && what.back() == '\n') what.pop_back();
    PrintError(what + HelpHint(app));
    return static_cast<int>(ExitCode::kUsage);
  }
  SetQuiet(quiet);
  if (!runner) {
    PrintError("no command given (see 'wanbackup --help')");
    return static_cast<int>(ExitCode::kUsage);
  }

  InstallSignalHandlers();
  const Status status = runner();
  if (status.ok()) return 0;
  PrintError(status.message());
  const int code = static_cast<int>(ExitCodeFor(status));
  // With --json, a document whatever happened: a script appending to a log (cron's
  // '>> db.jsonl') keeps a line for the failed run too. On JsonStream(): never into data.
  if (const auto [command, json] = ChosenCommand(app); json && !JsonPrinted()) {
    OutputJson({{"command", command}, {"error", status.message()}, {"exit_code", code}});
  }
  return code;
}

}  // namespace wanbackup::cli
