#!/bin/sh
# Record a sadc file with the sadc of three older sysstat releases (Ubuntu's packages), and
# convert each with the sadf of the same release: the files of tests/data/sysstat/versions.
# Needs curl, xz and dpkg-deb; run from this directory. See README.md.
set -eu
MIRROR=http://archive.ubuntu.com/ubuntu
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fetch() {  # fetch RELEASE PACKAGE -> extracted under $WORK/RELEASE
    curl -s -o "$WORK/$1.xz" "$MIRROR/dists/$1/main/binary-amd64/Packages.xz"
    file=$(xz -dc "$WORK/$1.xz" | grep -A20 "^Package: $2\$" | grep '^Filename' | head -1 | cut -d' ' -f2)
    curl -s -o "$WORK/$2_$1.deb" "$MIRROR/$file"
    dpkg-deb -x "$WORK/$2_$1.deb" "$WORK/$1"
}
fetch bionic libsensors4  # sadc 10.x and 11.x link libsensors.so.4
export LD_LIBRARY_PATH="$WORK/bionic/usr/lib/x86_64-linux-gnu"
# trusty (sysstat 10.2.0) is no longer in the archive's dists, its package still in the pool
curl -s -o "$WORK/sysstat_trusty.deb" "$MIRROR/pool/main/s/sysstat/sysstat_10.2.0-1_amd64.deb"
dpkg-deb -x "$WORK/sysstat_trusty.deb" "$WORK/trusty"
for pair in trusty:10.2.0 xenial:11.2.0 bionic:11.6.1 focal:12.2.0; do
    release=${pair%%:*} version=${pair#*:}
    [ "$release" = trusty ] || fetch "$release" sysstat
    rm -f "sa_$version"
    # six records of every disk, 1 s apart, while 94 MiB are written with O_DIRECT
    (dd if=/dev/urandom of="$WORK/io" bs=64k count=1500 oflag=direct 2>/dev/null; sync) &
    "$WORK/$release/usr/lib/sysstat/sadc" -S DISK 1 6 "sa_$version"
    wait
    TZ=UTC LC_ALL=C "$WORK/$release/usr/bin/sadf" -d -U "sa_$version" -- -d -p \
        > "sa_${version}_own_sadf_d_U.csv"
done
