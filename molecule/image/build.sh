#!/usr/bin/env bash
# Build the Debian 12 systemd test image every Molecule scenario and the lab use, without a registry:
# debootstrap a minimal root file system and import it into Podman. Skips when the image already exists.
set -euo pipefail

image="${RAILFORGE_TEST_IMAGE:-$(cat "$(dirname "$0")/TAG")}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# python3-apt: the apt module offline; dbus: hostnamectl; iproute2/procps: testinfra socket and process checks;
# kmod: modprobe/lsmod for the kernel-module tasks (skipped in containers, but the tools must exist).
packages=python3,python3-apt,systemd,dbus,sudo,iproute2,procps,kmod

if podman image exists "$image"; then
    echo "test image $image present"
    exit 0
fi

rootfs="$(mktemp -d /var/tmp/railforge-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" "$mirror"
rm -f "$rootfs"/var/cache/apt/archives/*.deb
tar -C "$rootfs" -c . | podman import --change 'CMD ["/lib/systemd/systemd"]' - "$image"
echo "test image $image built"
