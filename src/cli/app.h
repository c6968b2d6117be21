// The wanbackup program: parses the command line, runs the chosen verb, maps its Status to an
// exit code (cli/exit_codes.h). Called once from main().
#pragma once

namespace wanbackup::cli {

int Main(int argc, char** argv);

}  // namespace wanbackup::cli
