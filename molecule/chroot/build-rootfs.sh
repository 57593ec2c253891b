#!/usr/bin/env bash
# Build, once per machine, the Debian 12 root filesystem that the chroot scenarios unpack per run.
#
#   molecule/chroot/build-rootfs.sh            build it if the cache lacks it; print the tarball path last
#   molecule/chroot/build-rootfs.sh --path     print the tarball's path only (it may not exist yet)
#
# The tarball is keyed by the recipe (suite, package list, RECIPE), so a changed recipe builds a new
# one and an unchanged one is reused; bump RECIPE when changing a step below. It lives outside the
# repository:
# ${CLUSTERPROOF_CACHE:-~/.cache/clusterproof}/molecule/debian12-rootfs-<key>.tar
# Needs root and debootstrap (apt-get install debootstrap), and Debian's package mirror
# (CLUSTERPROOF_DEBIAN_MIRROR, default http://deb.debian.org/debian). Progress goes to stderr and to
# build.log beside the tarball; a first build takes a few minutes on 2 cores.
set -euo pipefail

SUITE=bookworm
RECIPE=2
MIRROR=${CLUSTERPROOF_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=${CLUSTERPROOF_CACHE:-$HOME/.cache/clusterproof}/molecule
# python3-apt: Ansible's apt modules; containerd and docker.io: the runtimes whose own binaries check
# the configs the toolkit role writes; kmod and initramfs-tools: what the driver role's handlers call;
# ca-certificates: what an https package source needs. Present here so a run needs no network.
PACKAGES=(python3 python3-apt ca-certificates kmod initramfs-tools containerd docker.io)

KEY=$(printf '%s\n' "$SUITE" "$RECIPE" "${PACKAGES[@]}" | sha256sum | cut -c1-12)
TARBALL=$CACHE/debian12-rootfs-$KEY.tar
LOG=$CACHE/build.log

if [[ ${1:-} == --path ]]; then
  echo "$TARBALL"
  exit 0
fi

say() { printf '[rootfs %s] %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$LOG" >&2; }

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9  # one build at a time; a second caller waits and then finds the tarball
if [[ -f $TARBALL ]]; then
  echo "$TARBALL"
  exit 0
fi
[[ $(id -u) -eq 0 ]] || { echo "building the chroot root filesystem needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "debootstrap not found: apt-get install debootstrap" >&2; exit 1; }

: >"$LOG"
WORK=$(mktemp -d "$CACHE/build.XXXXXX")
trap 'rm -rf --one-file-system "$WORK"' EXIT
ROOT=$WORK/rootfs
started=$SECONDS

say "debootstrap $SUITE (minbase + python3) from $MIRROR into $ROOT; log: $LOG"
debootstrap --variant=minbase --include=python3 "$SUITE" "$ROOT" "$MIRROR" 2>&1 |
  while IFS= read -r line; do
    # debootstrap prints one line per package; show the stage changes only.
    case $line in
      I:\ Validating\ Packages* | I:\ Extracting\ base-files* | I:\ Installing\ core* | I:\ Configuring\ required* | I:\ Base\ system*) say "$line" ;;
      *) echo "$line" >>"$LOG" ;;
    esac
  done
[[ -x $ROOT/usr/bin/python3 ]] || { say "debootstrap failed; see $LOG"; exit 1; }

# Services never start inside the chroot (there is no init): tell invoke-rc.d so.
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
chmod 0755 "$ROOT/usr/sbin/policy-rc.d"
say "apt-get install ${PACKAGES[*]} ($((SECONDS - started)) s so far)"
chroot "$ROOT" /usr/bin/env DEBIAN_FRONTEND=noninteractive LC_ALL=C \
  apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" >>"$LOG" 2>&1 ||
  { say "apt-get install failed; see $LOG"; exit 1; }
chroot "$ROOT" apt-get clean
rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/*.bin "$ROOT"/var/log/*.log
# An air-gapped host: no Debian source left, so a scenario reaches no network and the only source
# apt knows is the one the role under test writes.
: >"$ROOT/etc/apt/sources.list"

say "packing $TARBALL"
tar --numeric-owner -C "$ROOT" -cf "$WORK/rootfs.tar" .
mv "$WORK/rootfs.tar" "$TARBALL"
# Older recipes' tarballs are dead weight once a new one exists.
find "$CACHE" -maxdepth 1 -name 'debian12-rootfs-*.tar' ! -name "${TARBALL##*/}" -delete
say "done in $((SECONDS - started)) s: $(du -h "$TARBALL" | cut -f1)"
echo "$TARBALL"
