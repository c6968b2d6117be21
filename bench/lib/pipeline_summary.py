#!/usr/bin/env python3
"""Summarizes bench/pipeline: medians per tool and phase, ratios against restic and borg, and
wanbackup's CPU per stage. Usage: pipeline_summary.py RAW.csv STAGES.jsonl IMAGE_BYTES OUT.md"""
import csv
import json
import os
import statistics
import sys

raw_path, stages_path, image_bytes, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rows = list(csv.DictReader(open(raw_path)))
runs = sorted({int(r["run"]) for r in rows})
TOOLS = ["wanbackup", "wanbackup-libsodium", "restic", "borg", "zstd"]
GIB = 1 << 30


def pick(tool, phase, field):
    return [float(r[field]) for r in rows if r["tool"] == tool and r["phase"] == phase]


def med(tool, phase, field):
    v = pick(tool, phase, field)
    return statistics.median(v) if v else float("nan")


def cpu(tool, phase):
    v = [float(r["user_s"]) + float(r["sys_s"]) for r in rows if r["tool"] == tool and r["phase"] == phase]
    return statistics.median(v) if v else float("nan")


def added(tool):
    """Median bytes the second backup added to the repository."""
    out = []
    for run in runs:
        first = [float(r["repo_bytes"]) for r in rows if r["tool"] == tool and r["phase"] == "backup" and int(r["run"]) == run]
        second = [float(r["repo_bytes"]) for r in rows if r["tool"] == tool and r["phase"] == "second" and int(r["run"]) == run]
        if first and second:
            out.append(second[0] - first[0])
    return statistics.median(out) if out else float("nan")


mb = lambda b: b / 1e6


def machine():
    """The CPU the run had: figures from different hosts compare only with this beside them."""
    model, flags = "unknown CPU", set()
    try:
        for line in open("/proc/cpuinfo"):
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    extras = [name for flag, name in (("sha_ni", "SHA-NI"), ("avx2", "AVX2"), ("avx512f", "AVX-512"))
              if flag in flags]
    return f"{os.cpu_count()} cores of {model}" + (f" ({', '.join(extras)})" if extras else "")


lines = []
lines.append(f"Image: {image_bytes / GIB:.2f} GiB ext4 filesystem (real files + free space), read from /dev/shm; "
             f"repositories and restored images on local disk (restic's, borg's and zstd's output "
             f"fsynced inside the timing, as wanbackup's restore fsyncs), restore-mem to /dev/shm. Medians of {len(runs)} runs, interleaved; {machine()}.\n")
lines.append("| tool | first backup s | MB/s | CPU s | peak RSS MiB | repository MiB | second backup s (1 % changed) | added MiB | restore s | restore MB/s | restore to /dev/shm s | MB/s |")
lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
for t in TOOLS:
    b = med(t, "backup", "wall_s")
    second = med(t, "second", "wall_s")
    rs = med(t, "restore", "wall_s")
    rm = med(t, "restore-mem", "wall_s")
    repo = med(t, "backup", "repo_bytes")
    rss = max(pick(t, "backup", "max_rss_kib") + pick(t, "second", "max_rss_kib") or [float("nan")]) / 1024
    sec = f"{second:.2f}" if second == second else "–"
    add = f"{added(t) / 2**20:.1f}" if t != "zstd" else "–"
    lines.append(f"| {t} | {b:.2f} | {mb(image_bytes) / b:.0f} | {cpu(t, 'backup'):.2f} | {rss:.0f} | "
                 f"{repo / 2**20:.1f} | {sec} | {add} | {rs:.2f} | {mb(image_bytes) / rs:.0f} | {rm:.2f} | {mb(image_bytes) / rm:.0f} |")

wb_b, wb_r, wb_repo = med("wanbackup", "backup", "wall_s"), med("wanbackup", "restore", "wall_s"), med("wanbackup", "backup", "repo_bytes")
lines.append("")
lines.append("Ratios (higher is better for wanbackup):\n")
for t in ["restic", "borg"]:
    lines.append(f"- snapshot speed vs {t}: **{med(t, 'backup', 'wall_s') / wb_b:.2f}×** "
                 f"(goal ≥ 1.5×, aim 2×); repository size vs {t}: {wb_repo / med(t, 'backup', 'repo_bytes'):.3f} "
                 f"(goal ≤ 1.05); restore speed vs {t}: **{med(t, 'restore', 'wall_s') / wb_r:.2f}×** "
                 f"(goal ≥ {'2' if t == 'restic' else '1'}×), to /dev/shm "
                 f"**{med(t, 'restore-mem', 'wall_s') / med('wanbackup', 'restore-mem', 'wall_s'):.2f}×**; second snapshot vs {t}: "
                 f"{med(t, 'second', 'wall_s') / med('wanbackup', 'second', 'wall_s'):.2f}×")
lines.append(f"- snapshot speed vs zstd -T0 -3 alone: {med('zstd', 'backup', 'wall_s') / wb_b:.2f}×")
sodium = "wanbackup-libsodium"
lines.append(f"- OpenSSL vs libsodium for BLAKE2b and XChaCha20 (same bytes): snapshot "
             f"{med(sodium, 'backup', 'wall_s') / wb_b:.2f}× as fast with {cpu('wanbackup', 'backup'):.2f} "
             f"against {cpu(sodium, 'backup'):.2f} CPU s; restore to /dev/shm "
             f"{med(sodium, 'restore-mem', 'wall_s') / med('wanbackup', 'restore-mem', 'wall_s'):.2f}× "
             f"with {cpu('wanbackup', 'restore-mem'):.2f} against {cpu(sodium, 'restore-mem'):.2f} CPU s")

stages = [json.loads(l) for l in open(stages_path)]
lines.append("\nwanbackup CPU seconds per GiB read, by stage (median over runs):\n")
names = ["zero", "digest", "dedup", "compress", "encrypt", "write", "catalog"]
lines.append("| crypto | phase | " + " | ".join(names) + " | total |")
lines.append("|---|---|" + "---|" * (len(names) + 1))
for tool, crypto in [("wanbackup", "OpenSSL"), ("wanbackup-libsodium", "libsodium")]:
    for phase in ["backup", "second"]:
        mine = [s for s in stages if s.get("tool", "wanbackup") == tool and s["phase"] == phase]
        if not mine:
            continue
        per = {n: statistics.median([s["cpu"].get(n, 0.0) / (s["bytes"] / GIB) for s in mine]) for n in names}
        label = "first snapshot" if phase == "backup" else "second (1 % changed)"
        lines.append(f"| {crypto} | {label} | " + " | ".join(f"{per[n]:.3f}" for n in names) + f" | {sum(per.values()):.3f} |")

open(out_path, "w").write("\n".join(lines) + "\n")
