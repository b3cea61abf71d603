#!/usr/bin/env bash
# scripts/low-priority.sh COMMAND...: COMMAND at the lowest CPU priority, so that it takes only the CPU that other work
# leaves idle. Its processes run under nice 19; the containers Molecule starts under it (each platform's extra_opts,
# RAILFORGE_MOLECULE_PODMAN_OPTS) go into a cgroup of the lowest CPU weight, since a container's CPU share follows
# its cgroup's weight, not nice. That cgroup needs root, cgroup v1 and Podman's cgroupfs manager (CI's machines:
# PID 1 is not systemd); elsewhere this says so in one line and Molecule's containers keep the default weight.
# `make test` runs Molecule this way beside the test bed and the unit tests beside the lab (see the Makefile).
set -euo pipefail
name=railforge-low-priority
if [[ $EUID -eq 0 && -w /sys/fs/cgroup/cpu && ! -e /sys/fs/cgroup/cgroup.controllers ]] &&
  [[ $(podman info --format '{{.Host.CgroupManager}}' 2>/dev/null) == cgroupfs ]]; then
  mkdir -p "/sys/fs/cgroup/cpu/$name"
  echo 2 >"/sys/fs/cgroup/cpu/$name/cpu.shares"
  export RAILFORGE_MOLECULE_PODMAN_OPTS="[--cgroup-parent=/$name]"
  # Podman makes the cgroup in every hierarchy, with one for conmon under it: removed again once empty.
  trap 'for group in /sys/fs/cgroup/*/'"$name"'; do find "$group" -depth -type d -exec rmdir {} + ||
    echo "low-priority: $group is still in use, left as it is" >&2; done' EXIT
else
  echo "low-priority: no cgroup of low CPU weight here (it needs root, cgroup v1 and Podman's cgroupfs manager):" \
    "containers keep the default weight" >&2
fi
nice -n 19 "$@"
