# shellcheck shell=bash
# Helpers the benchmarks share. Source it after scripts/lib/common.sh; it defines functions only.
# The lab ones expect wanlab.env's NETNS_A, NETNS_B and ADDR_B (scripts/wanlab up writes it).

# bench_median: the median of the numbers on stdin, one per line (with an even count, the mean
# of the two in the middle).
bench_median() {
  sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

# bench_json EXPR: prints the Python expression EXPR, evaluated with d = the JSON document on
# stdin. Example: wanbackup copy ... --json | bench_json 'd["bytes_per_second"] / 1e6'
bench_json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# bench_out NAME OUT DEFAULTS CURRENT: the directory a bench writes its results to. OUT (its
# --out) when given; else docs/performance for the documented run (CURRENT, the options that
# change what is measured as one string, equals DEFAULTS, the same string before the arguments
# were read), and for any other run $(wb_build_dir)/bench-results/NAME, said on stderr, so that a
# short check run never replaces the figures docs/performance.md quotes.
bench_out() {
  if [[ -n "$2" ]]; then
    echo "$2"
  elif [[ "$3" == "$4" ]]; then
    echo "$(wb_root)/docs/performance"
  else
    local d
    d="$(wb_build_dir)/bench-results/$1"
    wb_note "not the documented run: results go to $d (--out docs/performance to replace the docs' figures)"
    echo "$d"
  fi
}

# bench_lab_down STATE: stops the reference target of STATE/target and takes down the emulated
# link of STATE (as brought up by `scripts/wanlab up --dir STATE`), whichever of them runs.
bench_lab_down() {
  "$(wb_root)/scripts/reftarget" stop --dir "$1/target" >/dev/null 2>&1 || true
  "$(wb_root)/scripts/wanlab" down --dir "$1" >/dev/null 2>&1 || true
}

# bench_iperf3 PORT ARGS...: one iperf3 run from a client in site A to a one-off server at
# $ADDR_B:PORT in site B; ARGS go to the client (-t SECONDS, -P STREAMS, -R for data from B to
# A, as READ data flows). Prints the client's JSON report. The client is tried again for up to
# 5 s while the server starts. Returns 1 when no run completed; the server is stopped then.
# (iperf3 3.12 exits 0 after "unable to connect" with --json: the report's "error" tells.)
# The report gains "wall_seconds": the successful client's run from launch to exit (connections,
# iperf3's control exchanges and the end included), to set against a command timed the same way.
bench_iperf3() {
  local port=$1 server out="" deadline=$((SECONDS + 5)) i t0 t1
  shift
  ip netns exec "$NETNS_B" iperf3 --server --one-off --bind "$ADDR_B" --port "$port" >/dev/null 2>&1 &
  server=$!
  while ((SECONDS <= deadline)); do
    t0=$(date +%s.%N)
    out=$(ip netns exec "$NETNS_A" iperf3 --client "$ADDR_B" --port "$port" --json "$@" 2>/dev/null) || true
    t1=$(date +%s.%N)
    # On stdin: a long run's report is larger than one argument may be (128 KiB).
    out=$(python3 -c 'import json,sys
d = json.load(sys.stdin)
if "error" in d: sys.exit(1)
d["wall_seconds"] = float(sys.argv[2]) - float(sys.argv[1])
print(json.dumps(d))' "$t0" "$t1" <<<"$out" 2>/dev/null) && break
    out=""
    kill -0 "$server" 2>/dev/null || break  # the one-off server is gone: a run began and failed
    sleep 0.1
  done
  if [[ -n "$out" ]]; then  # a one-off server ends after its run: give it 5 s to finish
    for ((i = 0; i < 50; i++)); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
  fi
  wb_stop_pid "$server" iperf3
  wait "$server" 2>/dev/null || true
  [[ -n "$out" ]] || return 1
  printf '%s\n' "$out"
}
