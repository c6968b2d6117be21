#!/usr/bin/env bash
# The integration-test fixture: `testbed.sh up DIR BUILD_DIR` brings up the emulated WAN
# (scripts/wanlab) and the reference target (scripts/reftarget) in site B with the LUNs the
# tests use, and writes DIR/testbed.env; `testbed.sh down DIR` removes all of it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cmd=${1:?usage: testbed.sh up|down DIR [BUILD_DIR]}
dir=${2:?usage: testbed.sh up|down DIR [BUILD_DIR]}
build=${3:-$root/build}

down() {
  "$root/scripts/reftarget" stop --dir "$dir/target" || true
  "$root/scripts/reftarget" stop --dir "$dir/target-chap" || true
  "$root/scripts/wanlab" down --dir "$dir" || true
  rm -f "$dir/testbed.env"
}

case "$cmd" in
  down) down; exit 0 ;;
  up) ;;
  *) echo "usage: testbed.sh up|down DIR [BUILD_DIR]" >&2; exit 2 ;;
esac

down
mkdir -p "$dir/secrets" "$dir/luns"
"$root/scripts/wanlab" up --dir "$dir" --wanem "$build/tests/wanem/wanem"
# shellcheck source=/dev/null  # wanlab.env: written at run time by scripts/wanlab up
source "$dir/wanlab.env"

# Secrets as users keep them: files of mode 0600.
(umask 077
 echo "alice-secret-01" > "$dir/secrets/chap.secret"
 echo "target-secret-2" > "$dir/secrets/mutual.secret"
 echo "wrong-secret-99" > "$dir/secrets/wrong.secret")

# LUN contents: random, with sizes that are no multiple of any power-of-two I/O size.
lun1="$dir/luns/plain-512.img" lun2="$dir/luns/plain-4096.img"
head -c $((64 * 1024 * 1024 + 12 * 1024)) /dev/urandom > "$lun1"
head -c $((40 * 1024 * 1024 + 8 * 1024)) /dev/urandom > "$lun2"

# Two reference targets side by side: open targets on port 3260, CHAP targets on 3261 (a
# discovery there needs credentials, which libiscsi's tools cannot give per target).
rt() { "$root/scripts/reftarget" "$@" --dir "$dir/target"; }
rtc() { "$root/scripts/reftarget" "$@" --dir "$dir/target-chap"; }
plain=iqn.2026-11.org.wanbackup:plain chap=iqn.2026-11.org.wanbackup:chap
mutual=iqn.2026-11.org.wanbackup:mutual ro=iqn.2026-11.org.wanbackup:readonly
scratch=iqn.2026-11.org.wanbackup:scratch
rt start --netns "$NETNS_B" --iqn "$plain" --backing "$lun1" --block-size 512
rt add-lun --iqn "$plain" --backing "$lun2" --block-size 4096 >/dev/null
rt add-target --iqn "$ro"
rt add-lun --iqn "$ro" --size 8M --readonly >/dev/null
# LUNs the write tests may overwrite (zeros at first): one large enough for their images, one not.
rt add-target --iqn "$scratch"
rt add-lun --iqn "$scratch" --size 48M >/dev/null
rt add-lun --iqn "$scratch" --size 8M --block-size 4096 >/dev/null
# A thin LUN (tgt's thin_provisioning=1) whose sparse backing file holds data in 20 % of it:
# 4 MiB pieces at the start of chunks 0, 5, 11, 16 and 22 of its 25, and 64 KiB inside chunk 20
# (a chunk only partly mapped is read whole). GET LBA STATUS reports the rest deallocated.
thin=iqn.2026-11.org.wanbackup:thin thin_file="$dir/luns/thin.img"
rm -f "$thin_file"
truncate -s 100M "$thin_file"
for mib in 0 20 44 64 88; do
  dd if=/dev/urandom of="$thin_file" bs=1M seek="$mib" count=4 conv=notrunc status=none
done
dd if=/dev/urandom of="$thin_file" bs=64K seek=$((81 * 16)) count=1 conv=notrunc status=none
rt add-target --iqn "$thin"
rt add-lun --iqn "$thin" --backing "$thin_file" --thin >/dev/null
rtc start --netns "$NETNS_B" --portal 0.0.0.0:3261 --iqn "$chap" --chap-user alice \
    --chap-secret-file "$dir/secrets/chap.secret" --size 16M
rtc add-target --iqn "$mutual" --chap-user bob --chap-secret-file "$dir/secrets/chap.secret" \
    --mutual-user tgt --mutual-secret-file "$dir/secrets/mutual.secret"
rtc add-lun --iqn "$mutual" --size 16M --block-size 4096 >/dev/null

cat > "$dir/testbed.env" <<ENV
PORTAL=$ADDR_B:3260
CHAP_PORTAL=$ADDR_B:3261
PLAIN_IQN=$plain
CHAP_IQN=$chap
MUTUAL_IQN=$mutual
READONLY_IQN=$ro
SCRATCH_IQN=$scratch
THIN_IQN=$thin
THIN_FILE=$thin_file
THIN_SIZE=$(stat -c %s "$thin_file")
THIN_DATA_BYTES=$((20 * 1024 * 1024 + 64 * 1024))
SCRATCH_LUN1_SIZE=$((48 * 1024 * 1024))
SCRATCH_LUN2_SIZE=$((8 * 1024 * 1024))
LUN1_FILE=$lun1
LUN1_SIZE=$(stat -c %s "$lun1")
LUN1_BLOCK=512
LUN2_FILE=$lun2
LUN2_SIZE=$(stat -c %s "$lun2")
LUN2_BLOCK=4096
CHAP_USER=alice
CHAP_SECRET_FILE=$dir/secrets/chap.secret
MUTUAL_USER=bob
MUTUAL_TARGET_USER=tgt
MUTUAL_TARGET_SECRET_FILE=$dir/secrets/mutual.secret
WRONG_SECRET_FILE=$dir/secrets/wrong.secret
TESTBED_READY=1
ENV
echo "testbed up in $dir"
