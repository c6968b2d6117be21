#!/usr/bin/env python3
"""clang-tidy over the files of a compile database, in parallel, remembering results.

Used by scripts/clang-tidy. A file is checked again only when something that decides its result
changed: the key of a result is a hash of the clang-tidy version, every .clang-tidy from the
file's directory up to the repository's top, the compile command, and the file preprocessed
(-fdirectives-only, so a change to any header it includes counts). Results, findings included,
are kept under BUILD/clang-tidy-cache/. Prints each finding once (a header's findings appear in
every file that includes it) and exits 1 when there is any.

A unity batch (CMake's Unity/unity_N_cxx.cxx, WANBACKUP_UNITY) is one entry that #includes its
sources: it is checked when any of them matches the pattern, with .cpp files reported like
headers, so CLI11's and json's headers are walked once a batch rather than once a file.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys

FINDING = re.compile(r"^(\S+):(\d+):(\d+): (warning|error): (.*)$")
UNITY = re.compile(r"/Unity/unity_\d+_cxx\.cxx$")
UNITY_INCLUDE = re.compile(r'^#include "(.+)"$', re.M)
# In a batch, the sources are included files: report their findings too. The batch's own
# #include of a .cpp is what a unity build is, not a finding.
UNITY_FILTER = "--header-filter=(src|tests|bench)/.*\\.(h|cpp)$"
UNITY_CHECKS = "-bugprone-suspicious-include"


def sources_of(entry):
    """The files an entry compiles: itself, or for a unity batch the sources it includes."""
    if not UNITY.search(entry["file"]):
        return [entry["file"]]
    with open(entry["file"], encoding="utf-8") as f:
        return UNITY_INCLUDE.findall(f.read())


def compile_args(entry):
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    if os.path.basename(args[0]) == "ccache":
        args = args[1:]
    return args


def preprocess_args(args):
    """The compile command turned into one that preprocesses to stdout."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD"):
            continue
        out.append(a)
    return out + ["-E", "-fdirectives-only", "-o", "-"]


def tidy_configs(path, top):
    """The contents of every .clang-tidy that applies to `path`, nearest last."""
    found, d = [], os.path.dirname(path)
    while True:
        cfg = os.path.join(d, ".clang-tidy")
        if os.path.isfile(cfg):
            with open(cfg, "rb") as f:
                found.append(cfg.encode() + b"\0" + f.read())
        if os.path.abspath(d) == top or d == os.path.dirname(d):
            break
        d = os.path.dirname(d)
    return b"\0".join(reversed(found))


def key_of(entry, version, top):
    args = compile_args(entry)
    pre = subprocess.run(preprocess_args(args), cwd=entry["directory"], capture_output=True)
    h = hashlib.sha256()
    for part in (version, tidy_configs(entry["file"], top), "\0".join(args).encode(),
                 pre.stdout if pre.returncode == 0 else os.urandom(16)):
        h.update(part)
        h.update(b"\0\0")
    return h.hexdigest()


def check(entry, build, cache, version, top, relax):
    """(file, output, cached?) for one compile database entry."""
    checks = [relax[r] for r in (os.path.relpath(f, top) for f in sources_of(entry)) if r in relax]
    extra_args = []
    if UNITY.search(entry["file"]):
        checks.insert(0, UNITY_CHECKS)
        extra_args.append(UNITY_FILTER)
    if checks:
        extra_args.append("--checks=" + ",".join(checks))
    key = key_of(entry, version + "".join(extra_args).encode(), top)
    path = os.path.join(cache, key)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return entry["file"], f.read(), True
    r = subprocess.run(["clang-tidy", "-p", build, "--quiet"] + extra_args + [entry["file"]],
                       capture_output=True, text=True)
    output = r.stdout
    if r.returncode != 0 and not any(FINDING.match(l) for l in output.splitlines()):
        output += f"{entry['file']}:1:1: error: clang-tidy failed ({r.returncode}): {r.stderr}\n"
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(output)
    os.replace(path + ".tmp", path)
    return entry["file"], output, False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--top", required=True)
    p.add_argument("-j", type=int, default=2)
    p.add_argument("--relax", action="append", default=[], metavar="FILE=CHECKS",
                   help="more --checks for one file (relative to --top), e.g. to turn one off")
    p.add_argument("pattern", help="regular expression for the files to check")
    o = p.parse_args()
    top = os.path.abspath(o.top)
    relax = dict(r.split("=", 1) for r in o.relax)
    with open(os.path.join(o.build, "compile_commands.json"), encoding="utf-8") as f:
        entries = [e for e in json.load(f)
                   if any(re.search(o.pattern, s) for s in sources_of(e))]
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True).stdout
    cache = os.path.join(o.build, "clang-tidy-cache")
    os.makedirs(cache, exist_ok=True)
    findings, checked, reused = set(), 0, 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=o.j) as pool:
        jobs = [pool.submit(check, e, o.build, cache, version, top, relax) for e in entries]
        for job in concurrent.futures.as_completed(jobs):
            _, output, cached = job.result()
            reused += cached
            checked += not cached
            for line in output.splitlines():
                m = FINDING.match(line)
                if m:
                    findings.add(os.path.relpath(m.group(1), top) + line[len(m.group(1)):])
    for line in sorted(findings):
        print(line, file=sys.stderr)
    files = sum(len(sources_of(e)) for e in entries)
    print(f"clang-tidy: {files} files in {len(entries)} runs, {checked} checked, {reused} unchanged since "
          f"their last check, {len(findings)} findings", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
