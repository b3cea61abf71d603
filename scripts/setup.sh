#!/usr/bin/env bash
# `make setup`: host packages, the test image, the pinned Python toolchain and the pinned collections.
# Every step checks first and does nothing when already done, so a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

# podman .. dpkg-dev: Molecule's test image and stand-in repository. Then the Kubernetes test bed (cgo for runc's
# seccomp support, Debian's CNI plugins, iptables for the kubelet) and headless chromium for the scheduler's
# dashboard test (its install took 57 s here, on a loaded machine); the SSH client Ansible reaches the lab's nodes by.
host_packages=(podman runc debootstrap dpkg-dev gcc libc6-dev pkg-config libseccomp-dev containernetworking-plugins
    iptables chromium openssh-client)
missing=()
for pkg in "${host_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    echo "host: installing ${missing[*]}"
    apt-get update -qq
    # One command, so apt satisfies podman's `crun | runc` with runc (crun cannot run on these hosts).
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${host_packages[@]}"
else
    echo "host: ${host_packages[*]} present"
fi

# The test image (debootstrap: network and disk) builds while the Python toolchain installs; the test bed's apt
# repository reads it. It runs in its own process group, stopped whole should a later step fail.
set -m
molecule/image/build.sh &
image_build=$!
set +m
trap 'kill -- -"$image_build" 2>/dev/null || true' EXIT

scripts/install.sh requirements-dev.txt

# The wheels of the machine running Ansible's install, for the test that runs scripts/install.sh as an operator
# would, without root and without a network (tests/unit/test_install.py).
wheels=/var/cache/railforge/wheels
wanted="$(cat requirements.txt pyproject.toml collections/offline-bundle.yml | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$wheels/.sha256" 2>/dev/null)" != "$wanted" ]]; then
    rm -rf "$wheels"
    scripts/install.sh --download "$wheels"
    echo "$wanted" >"$wheels/.sha256"
else
    echo "wheels: $wheels up to date"
fi

# The Kubernetes test bed: pinned upstream components built from Go modules into a versioned cache (cold: minutes).
# The build needs a go command that understands GOTOOLCHAIN (Go 1.21+): it then fetches the pinned toolchain through
# the module proxy. Debian 12's own golang-go is 1.19, so where no such go is installed take bookworm-backports'.
go_minor=$(go env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p') || true
if [[ -z $go_minor || $go_minor -lt 21 ]]; then
    mirror=${RAILFORGE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
    echo "go: no Go >= 1.21 found; installing golang-go from bookworm-backports ($mirror)"
    echo "deb $mirror bookworm-backports main" > /etc/apt/sources.list.d/railforge-backports.list
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports golang-go
    hash -r
fi
wait "$image_build"
trap - EXIT
.venv/bin/railforge testbed build
