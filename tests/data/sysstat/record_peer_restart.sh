#!/bin/bash
# Provenance of the real two-server restart recording in this directory (seed 001 gap handling).
#
# The same six loop devices as record_peer_fault.sh (six files of the delaying FUSE file system,
# identical backing, one fio process with the same open-loop load and synchronized bursts), no
# fault injected ever. Two sadc processes stand for two servers, each in its own UTS namespace
# (`unshare --uts`, hostname set inside), so each file's header holds its own host name:
#   server A (hostname srvA): sadc records srvA.sa; `sadf --dev=` keeps the first three loops
#   server B (hostname srvB): sadc records srvB.sa; `sadf --dev=` keeps the last three loops
# Server B's sadc records DURATION one-second records without a break into srvB.sa. Server A's
# first sadc records STOP_S records into srvA_1.sa and ends, no sadc runs on A for GAP_S seconds,
# then a second sadc records into a new file srvA_2.sa until the end of B's recording (a new
# activity file per sadc run, as seed 001's cycle daemon does after a reboot or at its daily
# rollover; appending to srvA_1.sa instead would make sadf print one record averaged over the
# whole gap).
#
#   usage: record_peer_restart.sh [OUTDIR]
#          (as root; needs python3-fusepy fio sysstat util-linux; DURATION, STOP_S, GAP_S
#          override the defaults below, e.g. for a short dry run)
#
# Writes into OUTDIR (default: this directory):
#   peer_restart_srvA_1_sadf_d.csv    sadf -d srvA_1.sa -- -d --dev=<loops 0-2>    (UTC timestamps)
#   peer_restart_srvA_1_sadf_d_U.csv  sadf -d -U srvA_1.sa -- -d --dev=<loops 0-2> (epoch timestamps)
#   peer_restart_srvA_2_sadf_d.csv    the same for srvA_2.sa (after the restart)
#   peer_restart_srvA_2_sadf_d_U.csv
#   peer_restart_srvB_sadf_d.csv      the same for srvB.sa and loops 3-5
#   peer_restart_srvB_sadf_d_U.csv
#   peer_restart.events              what happened when (UTC): loops, sadc starts and ends
# (the three .sa binaries are left in the temporary directory and deleted)
#
# Command used for the committed files (Debian 12, sysstat 12.6.1, fio 3.33):
#   tests/data/sysstat/record_peer_restart.sh
set -euo pipefail

OUT=$(cd "${1:-$(dirname "$0")}" && pwd)
DELAYFS=${DELAYFS:-/work/shared/tools/delayfs.py}
SADC=/usr/lib/sysstat/sadc
N=6
NAME=peer_restart
DURATION=${DURATION:-360}  # records of server B (seconds)
STOP_S=${STOP_S:-150}      # records of server A's first sadc
GAP_S=${GAP_S:-75}         # seconds without sadc on server A

W=$(mktemp -d /tmp/peerrst.XXXXXX)
EV=$OUT/$NAME.events
LOOPS=()
FUSE_PID= FIO_PID= SADCA_PID= SADCB_PID= BURST_PID=

log() { echo "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) $*" | tee -a "$EV"; }

cleanup() {
    set +e
    [ -n "$SADCA_PID" ] && kill "$SADCA_PID" 2>/dev/null
    [ -n "$SADCB_PID" ] && kill "$SADCB_PID" 2>/dev/null
    [ -n "$BURST_PID" ] && kill "$BURST_PID" 2>/dev/null
    [ -n "$FIO_PID" ] && kill "$FIO_PID" 2>/dev/null && wait "$FIO_PID" 2>/dev/null
    sleep 1
    while pgrep -f "fio --output=/dev/null $W/burst.fio" >/dev/null; do sleep 1; done
    for l in "${LOOPS[@]}"; do losetup -d "$l"; done
    mountpoint -q "$W/mnt" && umount "$W/mnt"
    [ -n "$FUSE_PID" ] && kill "$FUSE_PID" 2>/dev/null && wait "$FUSE_PID" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT

# sleep until $1 seconds after the epoch time $2
sleep_until() { sleep "$(awk -v t="$2" -v d="$1" -v now="$(date +%s.%N)" 'BEGIN { s = t + d - now; print (s > 0 ? s : 0) }')"; }

# sadc as server $1 (its own UTS namespace with hostname $1): sadc_as HOST COUNT FILE
sadc_as() { unshare --uts /bin/sh -c "hostname $1 && exec $SADC -S DISK 1 $2 $3"; }

: >"$EV"
log "host=$(hostname) kernel=$(uname -r) $(fio --version) sysstat=$($SADC -V 2>&1 | head -1)"

# 1. backing files and the delaying FUSE file system (control file "* 0": no delay, ever)
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
DEVA=$(basename -a "${LOOPS[@]:0:3}" | paste -sd,)
DEVB=$(basename -a "${LOOPS[@]:3:3}" | paste -sd,)
log "server A (srvA) keeps $DEVA, server B (srvB) keeps $DEVB"

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

# 4. record: B without a break; A stops after STOP_S records and restarts GAP_S seconds later
T0=$(date +%s.%N)
sadc_as srvB $((DURATION + 1)) "$W/srvB.sa" &
SADCB_PID=$!
sadc_as srvA $((STOP_S + 1)) "$W/srvA_1.sa" &
SADCA_PID=$!
log "sadc started: srvB $SADC -S DISK 1 $((DURATION + 1)) srvB.sa; srvA $SADC -S DISK 1 $((STOP_S + 1)) srvA_1.sa (epoch $T0)"
wait "$SADCA_PID"
log "srvA sadc ended (t=$(awk -v t="$T0" -v now="$(date +%s.%N)" 'BEGIN { printf "%.1f", now - t }') s)"
sleep_until $((STOP_S + GAP_S)) "$T0"
REST=$((DURATION - STOP_S - GAP_S))
sadc_as srvA $((REST + 1)) "$W/srvA_2.sa" &
SADCA_PID=$!
log "srvA sadc restarted: $SADC -S DISK 1 $((REST + 1)) srvA_2.sa (new file; t=$((STOP_S + GAP_S)) s)"
wait "$SADCA_PID"
SADCA_PID=
log "srvA sadc done"
wait "$SADCB_PID"
SADCB_PID=
log "srvB sadc done"
wait "$FIO_PID" || true
FIO_PID=
wait "$BURST_PID" || true
BURST_PID=
grep -E '^bg[0-9]+: \(groupid|IOPS=| lat \([um]sec\): min=' "$W/fio.out" | sed 's/^/fio: /' >>"$EV" || true

# 5. convert on the recording host, each server keeping its own three loops
for f in A_1:$DEVA A_2:$DEVA B:$DEVB; do
    s=${f%%:*}
    sadf -d "$W/srv$s.sa" -- -d --dev="${f#*:}" >"$OUT/${NAME}_srv${s}_sadf_d.csv"
    sadf -d -U "$W/srv$s.sa" -- -d --dev="${f#*:}" >"$OUT/${NAME}_srv${s}_sadf_d_U.csv"
done
log "converted: ${NAME}_srv{A_1,A_2,B}_sadf_d.csv ${NAME}_srv{A_1,A_2,B}_sadf_d_U.csv"
