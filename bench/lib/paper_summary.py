#!/usr/bin/env python3
"""Summarizes bench/paper-experiment's raw CSV: medians per delay and series, ratios, the models,
a Markdown table and a gnuplot script. Usage: paper_summary.py RAW.csv OUT_DIR RATE"""
import collections
import csv
import math
import os
import statistics
import sys

raw_path, out_dir, rate = sys.argv[1], sys.argv[2], sys.argv[3]
senders = sys.argv[4] if len(sys.argv) > 4 else ""  # TCP settings of site B, if known
emulator = sys.argv[5] if len(sys.argv) > 5 else ""  # wanlab's WANEM_MODE, if known
SERIES = ["iperf3-8", "iperf3-1", "wanbackup", "prototype", "baseline", "iscsi-perf", "qemu-img"]
# The middle 80 % of wanbackup's bytes and of iperf3's seconds: what a long transfer runs at.
STEADY = ["wanbackup-steady", "iperf3-8-steady"]
# The same bytes moved by both, each timed from launch to exit (set-up and finish included).
SAME = ["wanbackup-wall", "iperf3-8-bytes"]
# A realistic filesystem image read by `copy` and by `snapshot` right after it (--fs-size); the
# detail column holds each one's CPU seconds per GiB.
FS = ["fs-copy", "fs-snapshot"]

rows = list(csv.DictReader(open(raw_path)))
values = {}
cpu = {}  # (delay, fs series) -> CPU s/GiB per run
for r in rows:
    values.setdefault((r["delay_ms"], r["series"]), []).append(float(r["mb_per_s"]))
    if r["series"] in FS:
        per_gib = float(r["detail"].split()[0])
        cpu.setdefault((r["delay_ms"], r["series"]), []).append(per_gib)
delays = sorted({r["delay_ms"] for r in rows if r["delay_ms"] != "uncapped"}, key=float)


def median(delay, series):
    v = values.get((delay, series))
    return statistics.median(v) if v else float("nan")


# Models (docs/performance.md): the paper's serialized READ, throughput = B / (4d + B/S), and our
# pipelined one, min(S, C * W / RTT). S: TCP goodput of the link; W: what one connection from
# tgt carries per round trip alone; C: autotune's starting connection count (which assumes a
# connection sharing a busy link carries only 0.5 MB per round trip).
S = 117.0e6 if rate.lower() in ("1gbit", "1000mbit") else float("nan")
W = 2.5e6


def paper_model(delay_ms, b):
    d = delay_ms / 1e3
    return b / (4 * d + b / S) / 1e6


def pipelined_model(delay_ms):
    rtt = max(2 * delay_ms / 1e3, 1e-4)
    # autotune's starting C: within 4 and MaxConnections (16, more where 16 receive windows of
    # 3 MiB do not hold 1.5 x 125 MB/s x RTT, at most 32; src/initiator/autotune.h)
    most = min(32, max(16, math.ceil(1.5 * 125e6 * rtt / (3 << 20))))
    c = min(most, max(4, math.ceil(125e6 * rtt / 0.5e6)))
    return min(S, c * W / rtt) / 1e6


with open(os.path.join(out_dir, "paper-experiment.csv"), "w") as f:
    f.write("delay_ms," + ",".join(SERIES) + ",model_paper_128k,model_paper_4m,model_pipelined,"
            "wanbackup_vs_iperf3_8,wanbackup_vs_baseline,runs," + ",".join(STEADY) + ","
            + ",".join(FS) + ",fs_snapshot_vs_copy," + ",".join(SAME) + "\n")
    for d in delays:
        m = {s: median(d, s) for s in SERIES}
        dd = float(d)
        f.write("%s,%s,%.2f,%.2f,%.2f,%.3f,%.1f,%d,%s,%s,%.3f,%s\n" % (
            d, ",".join("%.2f" % m[s] for s in SERIES), paper_model(dd, 131072),
            paper_model(dd, 4194304), pipelined_model(dd), m["wanbackup"] / m["iperf3-8"],
            m["wanbackup"] / m["baseline"], len(values.get((d, "wanbackup"), [])),
            ",".join("%.2f" % median(d, s) for s in STEADY),
            ",".join("%.2f" % median(d, s) for s in FS),
            median(d, "fs-snapshot") / median(d, "fs-copy"),
            ",".join("%.2f" % median(d, s) for s in SAME)))

with open(os.path.join(out_dir, "paper-experiment.md"), "w") as f:
    f.write("| one-way delay | iperf3 ×8 | iperf3 ×1 | **wanbackup** | wanbackup / iperf3 ×8 "
            "| prototype 1×4 MiB | baseline 1×128 KiB | wanbackup / baseline | iscsi-perf best "
            "| qemu-img | steady: wanbackup / iperf3 ×8 | same bytes, launch to exit: "
            "wanbackup / iperf3 ×8 |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")

    def ratio(a, b):  # "A / B = R %", or "–" where an older raw file has no such series
        return ("%.1f / %.1f = %.0f %%" % (a, b, 100 * a / b)
                if not (math.isnan(a) or math.isnan(b) or b == 0) else "–")

    for d in delays:
        m = {s: median(d, s) for s in SERIES + STEADY + SAME}
        f.write("| %s ms | %.1f | %.1f | **%.1f** | %.0f %% | %.1f | %.2f | ×%.0f | %.1f | %.1f | %s | %s |\n" % (
            d, m["iperf3-8"], m["iperf3-1"], m["wanbackup"], 100 * m["wanbackup"] / m["iperf3-8"],
            m["prototype"], m["baseline"], m["wanbackup"] / m["baseline"], m["iscsi-perf"],
            m["qemu-img"], ratio(m["wanbackup-steady"], m["iperf3-8-steady"]),
            ratio(m["wanbackup-wall"], m["iperf3-8-bytes"])))
    if ("uncapped", "wanbackup") in values:
        # Each iscsi-perf setting is its own series here (older raw files: one "iscsi-perf", the
        # best per run); "best" is the setting with the best median, set against the median of
        # all of wanbackup's copies.
        settings = sorted({s for (d, s) in values if d == "uncapped" and s.startswith("iscsi-perf")},
                          key=lambda s: -median("uncapped", s))
        best = settings[0] if settings else "iscsi-perf"
        others = "; ".join("%s %.1f" % (s[len("iscsi-perf "):], median("uncapped", s))
                           for s in settings[1:])
        f.write("\nUncapped link at 0 ms (CPU-bound): wanbackup %.1f MB/s (median of %d copies), "
                "iscsi-perf's best setting%s %.1f MB/s (median of %d%s), iperf3 ×8 %.1f MB/s "
                "(median): wanbackup / iscsi-perf = %.0f %%.\n" % (
                    median("uncapped", "wanbackup"), len(values[("uncapped", "wanbackup")]),
                    best[len("iscsi-perf"):], median("uncapped", best),
                    len(values.get(("uncapped", best), [])), "; the others: " + others if others else "",
                    median("uncapped", "iperf3-8"),
                    100 * median("uncapped", "wanbackup") / median("uncapped", best)))
    if any((d, "fs-snapshot") in values for d in delays):
        f.write("\nThe realistic filesystem image (60 % files, `scripts/fs-image`): `copy` to "
                "/dev/null, then `snapshot` into a fresh repository on local disk, at each delay "
                "(medians; CPU seconds per GiB of the LUN, user + system of wanbackup; the "
                "snapshot's include unlocking the key, Argon2id, about 0.4 CPU s a run):\n\n"
                "| one-way delay | copy MB/s | snapshot MB/s | snapshot / copy | copy CPU s/GiB "
                "| snapshot CPU s/GiB |\n|---|---|---|---|---|---|\n")
        for d in delays:
            if (d, "fs-snapshot") not in values:
                continue
            f.write("| %s ms | %.1f | %.1f | %.0f %% | %.2f | %.2f |\n" % (
                d, median(d, "fs-copy"), median(d, "fs-snapshot"),
                100 * median(d, "fs-snapshot") / median(d, "fs-copy"),
                statistics.median(cpu[(d, "fs-copy")]),
                statistics.median(cpu[(d, "fs-snapshot")])))
    if emulator:
        f.write("\nEmulator: %s (docs/testing.md, \"Super-packets\").\n" % emulator)
    if senders:
        f.write("\nSenders' TCP (target and iperf3 server; congestion control as chosen with --congestion-control, the rest the host's): %s.\n" % senders)
    def per_run(series, title):
        details = {}
        for r in rows:
            if r["series"] == series:
                details.setdefault(r["delay_ms"], []).append(r["detail"])
        f.write("\n" + title + ": " + "; ".join(
            "%s: %s" % (d if d == "uncapped" else d + " ms", " / ".join(
                t if n == 1 else "%s (×%d)" % (t, n)
                for t, n in collections.Counter(details[d]).items()))  # in order of first run
            for d in delays + ["uncapped"] if d in details) + ".\n")

    per_run("wanbackup", "wanbackup's connections, peak RSS, tgtd's CPU and the hypervisor's "
            "share of the CPU (steal) per run")
    per_run("iperf3-8", "iperf3 ×8's duration and steal per run")
    if any((d, "iperf3-8-bytes") in values for d in delays):
        per_run("wanbackup-wall", "wanbackup's copy from launch to exit, and by its own clock")
        per_run("iperf3-8-bytes", "iperf3 ×8 moving the same bytes")

with open(os.path.join(out_dir, "paper-experiment.gp"), "w") as f:
    # Names relative to the .gp's own directory (gnuplot runs there), so that the committed file
    # does not carry the path of the checkout that produced it.
    data = "paper-experiment.csv"
    xmax = max([128] + [2 ** math.ceil(math.log2(float(d))) for d in delays if float(d) > 0])
    f.write(f"""set terminal pngcairo size 1100,700 font ",11"
set output "paper-experiment.png"
set datafile separator ","
set key outside right top
set logscale x 2
set logscale y 10
set xlabel "one-way delay (ms)"
set ylabel "throughput (MB/s)"
set title "Sequential iSCSI reads through an emulated {rate} link (medians)"
set grid
set xrange [0.5:{xmax}]
plot \\
 "{data}" using ($1==0?0.7:$1):2 with linespoints lw 2 title "iperf3, 8 streams", \\
 "{data}" using ($1==0?0.7:$1):3 with linespoints title "iperf3, 1 stream", \\
 "{data}" using ($1==0?0.7:$1):4 with linespoints lw 3 title "wanbackup (defaults)", \\
 "{data}" using ($1==0?0.7:$1):5 with linespoints title "1 x 4 MiB (paper's prototype)", \\
 "{data}" using ($1==0?0.7:$1):6 with linespoints title "1 x 128 KiB (paper's baseline)", \\
 "{data}" using ($1==0?0.7:$1):7 with linespoints title "iscsi-perf (best)", \\
 "{data}" using ($1==0?0.7:$1):8 with linespoints title "qemu-img convert", \\
 "{data}" using ($1==0?0.7:$1):17 with linespoints dt 2 lw 2 title "wanbackup copy, fs image", \\
 "{data}" using ($1==0?0.7:$1):18 with linespoints dt 2 lw 2 title "wanbackup snapshot, fs image", \\
 "{data}" using ($1==0?0.7:$1):9 with lines dt 2 lc rgb "gray40" title "model B/(4d+B/S), B=128 KiB", \\
 "{data}" using ($1==0?0.7:$1):10 with lines dt 3 lc rgb "gray40" title "model B/(4d+B/S), B=4 MiB", \\
 "{data}" using ($1==0?0.7:$1):11 with lines dt 4 lc rgb "black" title "model min(S, C·W/RTT)"
""")
