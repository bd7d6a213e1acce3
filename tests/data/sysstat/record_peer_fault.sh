#!/bin/bash
# Provenance of the real peer-group recordings in this directory (reference/sysstat.md §2.2, §2.4).
#
# Six loop devices on six files of the delaying FUSE file system (identical backing), one fio
# process driving all six with the same open-loop load (randrw 16 KiB, Poisson arrivals,
# --rate_iops) plus synchronized 128 KiB sequential write bursts (10 s of every 45 s), recorded
# with `sadc -S DISK 1 <seconds+1>`. In "fault" mode one LUN (lun3.img) gets a per-I/O delay of
# 12 ms from ONSET_S to OFFSET_S after the start of sadc; "clean" mode never delays anything.
#
#   usage: record_peer_fault.sh fault|clean [OUTDIR]
#          (as root; needs python3-fusepy fio sysstat; DURATION, ONSET_S, OFFSET_S, DELAY_MS,
#          SLOW override the defaults below, e.g. for a short dry run)
#
# Writes into OUTDIR (default: this directory), NAME = peer_fault or peer_clean:
#   NAME.sa               sadc binary file (holds major:minor; names resolve on this host only)
#   NAME_sadf_d.csv       sadf -d NAME.sa -- -d       (UTC timestamps)
#   NAME_sadf_d_U.csv     sadf -d -U NAME.sa -- -d    (epoch timestamps)
#   NAME.events           what happened when: loop devices, sadc start, fault onset/offset (UTC)
#
# Commands used for the committed files (Debian 12, sysstat 12.6.1, fio 3.33):
#   tests/data/sysstat/record_peer_fault.sh clean
#   tests/data/sysstat/record_peer_fault.sh fault
set -euo pipefail

MODE=${1:?usage: record_peer_fault.sh fault|clean [OUTDIR]}
OUT=$(cd "${2:-$(dirname "$0")}" && pwd)
DELAYFS=${DELAYFS:-/work/shared/tools/delayfs.py}
SADC=/usr/lib/sysstat/sadc
N=6
SLOW=${SLOW:-3}            # index of the slowed file: lun$SLOW.img
DELAY_MS=${DELAY_MS:-12}
case $MODE in
fault)
    NAME=peer_fault
    DURATION=${DURATION:-540}
    ONSET_S=${ONSET_S:-180}
    OFFSET_S=${OFFSET_S:-420}
    ;;
clean)
    NAME=peer_clean
    DURATION=${DURATION:-360}
    ;;
*)
    echo "usage: record_peer_fault.sh fault|clean [OUTDIR]" >&2
    exit 2
    ;;
esac

W=$(mktemp -d /tmp/peerrec.XXXXXX)
EV=$OUT/$NAME.events
LOOPS=()
FUSE_PID= FIO_PID= SADC_PID= BURST_PID=

log() { echo "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) $*" | tee -a "$EV"; }

cleanup() {
    set +e
    [ -n "$SADC_PID" ] && kill "$SADC_PID" 2>/dev/null
    [ -n "$BURST_PID" ] && kill "$BURST_PID" 2>/dev/null
    [ -n "$FIO_PID" ] && kill "$FIO_PID" 2>/dev/null && wait "$FIO_PID" 2>/dev/null
    sleep 1
    while pgrep -f "fio --output=/dev/null $W/burst.fio" >/dev/null; do sleep 1; done
    echo "* 0" >"$W/ctrl"
    for l in "${LOOPS[@]}"; do losetup -d "$l"; done
    mountpoint -q "$W/mnt" && umount "$W/mnt"
    [ -n "$FUSE_PID" ] && kill "$FUSE_PID" 2>/dev/null && wait "$FUSE_PID" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT

# sleep until $1 seconds after the epoch time $2
sleep_until() { sleep "$(awk -v t="$2" -v d="$1" -v now="$(date +%s.%N)" 'BEGIN { s = t + d - now; print (s > 0 ? s : 0) }')"; }

: >"$EV"
log "mode=$MODE host=$(hostname) kernel=$(uname -r) $(fio --version) sysstat=$($SADC -V 2>&1 | head -1)"

# 1. backing files and the delaying FUSE file system
mkdir "$W/back" "$W/mnt"
echo "* 0" >"$W/ctrl"
for i in $(seq 0 $((N - 1))); do
    dd if=/dev/zero of="$W/back/lun$i.img" bs=1M count=64 status=none
done
/usr/bin/python3 "$DELAYFS" "$W/back" "$W/mnt" "$W/ctrl" &
FUSE_PID=$!
for _ in $(seq 50); do mountpoint -q "$W/mnt" && break; sleep 0.2; done
mountpoint -q "$W/mnt"

# 2. one loop device per file (buffered loop, dio=0: every I/O goes through delayfs)
for i in $(seq 0 $((N - 1))); do
    LOOPS+=("$(losetup -f --show "$W/mnt/lun$i.img")")
    log "lun$i.img -> ${LOOPS[$i]} ($(lsblk -dno MAJ:MIN "${LOOPS[$i]}" | tr -d ' '))"
done

# 3. identical open-loop load on all six (one fio process), and synchronized bursts: 10 s of
#    128 KiB sequential writes at 30 IOPS on all six, every 45 s from 20 s after the start of fio
{
    printf '[global]\nioengine=libaio\ndirect=1\ntime_based=1\nruntime=%s\n' $((DURATION + 15))
    printf 'rw=randrw\nrwmixread=70\nbs=16k\niodepth=4\nrate_iops=40\nrate_process=poisson\n'
    for i in $(seq 0 $((N - 1))); do printf '[bg%s]\nfilename=%s\n' "$i" "${LOOPS[$i]}"; done
} >"$W/peer.fio"
{
    printf '[global]\nioengine=libaio\ndirect=1\ntime_based=1\nruntime=10\n'
    printf 'rw=write\nbs=128k\niodepth=4\nrate_iops=30\n'
    for i in $(seq 0 $((N - 1))); do printf '[burst%s]\nfilename=%s\n' "$i" "${LOOPS[$i]}"; done
} >"$W/burst.fio"
TF=$(date +%s.%N)
fio --output="$W/fio.out" "$W/peer.fio" &
FIO_PID=$!
(
    for b in $(seq 0 $(((DURATION + 3 - 20 - 10) / 45))); do
        sleep_until $((20 + 45 * b)) "$TF"
        fio --output=/dev/null "$W/burst.fio"
    done
) &
BURST_PID=$!
sleep 3

# 4. record, and switch the fault on and off relative to sadc's start
T0=$(date +%s.%N)
$SADC -S DISK 1 $((DURATION + 1)) "$OUT/$NAME.sa" &
SADC_PID=$!
log "sadc started: $SADC -S DISK 1 $((DURATION + 1)) $NAME.sa (epoch $T0)"
if [ "$MODE" = fault ]; then
    sleep_until "$ONSET_S" "$T0"
    echo "lun$SLOW.img $DELAY_MS" >"$W/ctrl.new" && mv "$W/ctrl.new" "$W/ctrl"
    log "fault ON: lun$SLOW.img ${LOOPS[$SLOW]} ${DELAY_MS} ms per FUSE read/write (t=${ONSET_S} s)"
    sleep_until "$OFFSET_S" "$T0"
    echo "* 0" >"$W/ctrl.new" && mv "$W/ctrl.new" "$W/ctrl"
    log "fault OFF: lun$SLOW.img ${LOOPS[$SLOW]} (t=${OFFSET_S} s)"
fi
wait "$SADC_PID"
SADC_PID=
log "sadc done"
wait "$FIO_PID" || true
FIO_PID=
wait "$BURST_PID" || true
BURST_PID=
grep -E '^bg[0-9]+: \(groupid|IOPS=| lat \([um]sec\): min=' "$W/fio.out" | sed 's/^/fio: /' >>"$EV" || true

# 5. convert on the recording host (names of 7:N resolve here)
sadf -d "$OUT/$NAME.sa" -- -d >"$OUT/${NAME}_sadf_d.csv"
sadf -d -U "$OUT/$NAME.sa" -- -d >"$OUT/${NAME}_sadf_d_U.csv"
log "converted: ${NAME}_sadf_d.csv ${NAME}_sadf_d_U.csv"
