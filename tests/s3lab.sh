#!/usr/bin/env bash
# The S3 fixture: `s3lab.sh up DIR TESTBED_DIR` starts the S3 lab (scripts/s3lab: Ceph and
# radosgw) in site B of the testbed that the `testbed` fixture brought up, so that S3 requests
# from site A cross the emulated WAN, and writes DIR/s3lab.env; `s3lab.sh down DIR` stops it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cmd=${1:?usage: s3lab.sh up|down DIR [TESTBED_DIR]}
dir=${2:?usage: s3lab.sh up|down DIR [TESTBED_DIR]}

case "$cmd" in
  down) exec "$root/scripts/s3lab" stop --dir "$dir" ;;
  up) ;;
  *) echo "usage: s3lab.sh up|down DIR [TESTBED_DIR]" >&2; exit 2 ;;
esac
testbed=${3:?usage: s3lab.sh up DIR TESTBED_DIR}
# shellcheck source=/dev/null  # wanlab.env: written at run time by scripts/wanlab up
source "$testbed/wanlab.env"
exec "$root/scripts/s3lab" start --dir "$dir" --netns "$NETNS_B" --endpoint "$ADDR_B:7480"
