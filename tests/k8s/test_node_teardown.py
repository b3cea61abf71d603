"""Stopping a node leaves the host as it found it (runs after test_node.py has stopped its node)."""

import json
import subprocess
from pathlib import Path

from kubernetes import client

from railforge.testbed.build import cache_root
from railforge.testbed.node import (
    KUBELET_SYSCTLS,
    NODE_LOCK,
    SHARED_HOST_PATHS,
    KubeletNode,
    cgroup_hierarchies,
    firewall_rules,
    one_shot_pod,
)
from railforge.testbed.procs import processes_matching, wait_for

SYSCTLS = (*KUBELET_SYSCTLS, "net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding")
# Podman's overlay driver mounts its graph root while any podman process runs (e.g. conmon's clean-up of the
# containers test_node_reboot.py removed); the node never uses Podman, so those mounts are not the node's.
PODMAN_GRAPH_ROOT = "/var/lib/containers/storage"


def host_state() -> dict:
    links = json.loads(subprocess.run(["ip", "-j", "link"], capture_output=True, check=True).stdout)
    return {
        "sysctls": {key: (Path("/proc/sys") / key).read_text() for key in SYSCTLS},
        "firewall": firewall_rules(),
        "links": sorted(link["ifname"] for link in links),
        "mounts": sorted(
            line for line in Path("/proc/self/mounts").read_text().splitlines() if PODMAN_GRAPH_ROOT not in line
        ),
        "cgroups": sorted(str(p) for hierarchy in cgroup_hierarchies() for p in hierarchy.iterdir() if p.is_dir()),
        "paths": {str(path): path.exists() for path in (*SHARED_HOST_PATHS, NODE_LOCK)},
        "processes": sorted(processes_matching(f"{cache_root()}/testbed/") + processes_matching("containerd-shim")),
    }


def test_stop_undoes_every_change_start_made_to_the_host(control_plane):
    before = host_state()
    node = KubeletNode.start(control_plane, name="rf-node-teardown")
    try:
        core = client.CoreV1Api(control_plane.api)
        # A service-account token volume: a tmpfs mount under the kubelet's directory.
        core.create_namespaced_pod("default", one_shot_pod("teardown", node.name, ["sleep", "3600"], token=True))
        wait_for(
            "the pod to run", lambda: core.read_namespaced_pod("teardown", "default").status.phase == "Running", 60
        )
        during = host_state()
        for changed in ("links", "mounts", "cgroups", "processes", "firewall", "paths"):
            assert during[changed] != before[changed], changed  # the node really touched each of these
        assert during["sysctls"]["vm/overcommit_memory"].strip() == "1"  # the kubelet's host-wide setting
    finally:
        node.stop()
    assert host_state() == before
    core.delete_namespaced_pod("teardown", "default", grace_period_seconds=0)  # its kubelet is gone
