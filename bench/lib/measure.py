#!/usr/bin/env python3
"""Runs one command and prints what it cost, as one JSON line on standard output.
Usage: measure.py LABEL [--stdin FILE] [--stdout FILE [--fsync]] -- COMMAND...
Prints to standard output one JSON object: label, wall seconds, user and system CPU seconds of
the command and its children, peak RSS of the largest process (KiB), exit code. The command's
own output goes to the files given (or /dev/null), so the figure line is never mixed with it.
--fsync flushes the --stdout file to disk before the clock stops: a restore is done when its
data is on disk, which is what wanbackup's own restore waits for.
"""
import json
import os
import subprocess
import sys
import time


def main():
    args = sys.argv[1:]
    if "--" not in args or not args or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    label = args[0]
    split = args.index("--")
    opts, command = args[1:split], args[split + 1 :]
    stdin_path = stdout_path = None
    fsync = False
    i = 0
    while i < len(opts):
        if opts[i] == "--fsync":
            fsync = True
            i += 1
            continue
        if opts[i] == "--stdin":
            stdin_path = opts[i + 1]
        elif opts[i] == "--stdout":
            stdout_path = opts[i + 1]
        else:
            print(f"measure.py: unknown option {opts[i]}", file=sys.stderr)
            sys.exit(2)
        i += 2
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    stdout = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    start = time.monotonic()
    proc = subprocess.Popen(command, stdin=stdin, stdout=stdout)
    _, status, usage = os.wait4(proc.pid, 0)
    if fsync and stdout_path:
        stdout.flush()
        os.fsync(stdout.fileno())
    wall = time.monotonic() - start
    code = os.waitstatus_to_exitcode(status)
    print(json.dumps({
        "label": label,
        "wall_s": round(wall, 3),
        "user_s": round(usage.ru_utime, 3),
        "sys_s": round(usage.ru_stime, 3),
        "max_rss_kib": usage.ru_maxrss,
        "exit": code,
    }))
    sys.exit(0 if code == 0 else 1)


if __name__ == "__main__":
    main()
