#include "cli/app.h"

int main(int argc, char** argv) {
  return wanbackup::cli::Main(argc, argv);
}
