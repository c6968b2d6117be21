# shellcheck shell=bash
# Shared helpers for the project's scripts. Source it; it defines functions only.

wb_die() { echo "$(basename "$0"): error: $*" >&2; exit 2; }
wb_fail() { echo "$(basename "$0"): error: $*" >&2; exit 1; }
wb_note() { echo "$(basename "$0"): $*" >&2; }

# wb_usage SCRIPT: prints the comment block at the top of SCRIPT (after the #! line), which is
# each script's --help, so no script has to count its own header lines.
wb_usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$1"; }

# The repository's top directory.
wb_root() { cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd; }

# wb_pid_is PID NAME: true when PID is alive and its command name is NAME. Guards every kill
# against a PID that the kernel has handed to an unrelated process since we recorded it.
wb_pid_is() {
  local pid=$1 name=$2
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/comm ]] || return 1
  [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$name" ]]
}

# wb_stop_pid PID NAME [SECONDS]: SIGTERM, wait, then SIGKILL; only if PID still runs NAME.
wb_stop_pid() {
  local pid=$1 name=$2 wait_s=${3:-5} i
  wb_pid_is "$pid" "$name" || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < wait_s * 10; i++)); do
    wb_pid_is "$pid" "$name" || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 20; i++)); do
    wb_pid_is "$pid" "$name" || return 0
    sleep 0.1
  done
}

# The build directory holding wanbackup and wanem: $WANBACKUP_BUILD_DIR, else build/release.
wb_build_dir() { echo "${WANBACKUP_BUILD_DIR:-$(wb_root)/build/release}"; }

# wb_new_passphrase FILE: a random passphrase (24 bytes, base64) in FILE, created anew (an old
# one is removed first, whatever its mode) under umask 077: mode 0600, never readable by others.
# For throwaway repositories (demo, benchmarks).
wb_new_passphrase() { rm -f "$1" && (umask 077 && head -c 24 /dev/urandom | base64 >"$1"); }
