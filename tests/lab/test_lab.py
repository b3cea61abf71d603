"""The lab (`make lab`) end to end, as CI runs it: three Podman node containers made into a Kubernetes cluster by
playbooks/site.yml (kubeadm from the local signed apt repository, every image preloaded: nothing pulled), the
scheduler and the MPI operator deployed by their roles, Multus and whereabouts by the network stage, fake GPUs and
RDMA devices served to the workers' kubelets by the device-plugin stand-in, and an MPIJob gang-scheduled by railforge
whose two workers run on two nodes, each with the devices it requested and an address on the rail network; then a
second run and a check run change nothing, and `lab.sh down` leaves nothing."""

import ipaddress
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = "inventories/lab/hosts.yml"
NODES = ("lab-cp-01", "lab-node-01", "lab-node-02")
WORKERS = ("lab-node-01", "lab-node-02")
RAIL_CIDR = ipaddress.ip_network("10.89.51.0/24")  # rail_networks_cidrs of inventories/lab
STATE = Path("/run/railforge-lab")
SYSCTLS = ("vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops")
ENV = {**os.environ, "CONTAINERS_CONF": str(ROOT / "molecule/containers.conf"), "ANSIBLE_NOCOLOR": "1"}

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the lab runs privileged Podman containers (root)")


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, cwd=ROOT, env=ENV, capture_output=True, text=True, check=False)
    if check and result.returncode:
        raise AssertionError(
            f"{' '.join(argv)} failed ({result.returncode}):\n{result.stdout[-6000:]}{result.stderr[-3000:]}"
        )
    return result


def kubectl(*argv: str) -> str:
    return run("podman", "exec", "lab-cp-01", "kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", *argv).stdout


def recap(output: str) -> dict[str, dict[str, int]]:
    """host -> {ok, changed, failed, ...} of a playbook run's PLAY RECAP (summed over its plays)."""
    totals: dict[str, dict[str, int]] = {}
    for host, counts in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", output, re.M):
        for key, value in re.findall(r"(\w+)=(\d+)", counts):
            totals.setdefault(host, {}).setdefault(key, 0)
            totals[host][key] += int(value)
    return totals


def sysctls() -> dict[str, str]:
    return {key: run("sysctl", "-n", key).stdout.strip() for key in SYSCTLS}


@pytest.fixture(scope="module")
def lab():
    before = sysctls()
    run("scripts/lab.sh", "down")
    try:
        up = run("scripts/lab.sh", "up")
        print(up.stdout[up.stdout.find("lab: cluster up in") :])  # the timings, the job and its table (pytest -s)
        yield {"up": up.stdout, "sysctls": before}
    finally:
        run("scripts/lab.sh", "down", check=False)


def test_cluster_is_made_by_kubeadm_from_local_packages_and_preloaded_images(lab):
    nodes = json.loads(kubectl("get", "nodes", "-o", "json"))["items"]
    assert sorted(node["metadata"]["name"] for node in nodes) == sorted(NODES)
    for node in nodes:
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True", node["metadata"]["name"]
        assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.36.5"
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"] == "containerd://2.3.7"
    for name in NODES:  # the only apt sources are the local repository, and the packages are held
        sources = run("podman", "exec", name, "sh", "-c", "cat /etc/apt/sources.list.d/kubernetes.list").stdout
        assert "file:/srv/railforge-apt/" in sources and "signed-by=" in sources
        held = run("podman", "exec", name, "apt-mark", "showhold").stdout.split()
        assert sorted(held) == ["containerd.io", "cri-tools", "kubeadm", "kubectl", "kubelet"]
    pulls = kubectl("get", "events", "-A", "--field-selector", "reason=Pulling", "-o", "name")
    assert pulls.strip() == "", f"images were pulled, not preloaded: {pulls}"
    system = json.loads(kubectl("get", "pods", "-n", "kube-system", "-o", "json"))["items"]
    assert {"kube-dns", "kube-proxy"} <= {pod["metadata"].get("labels", {}).get("k8s-app") for pod in system}
    assert all(pod["status"]["phase"] == "Running" for pod in system), [p["metadata"]["name"] for p in system]
    daemonsets = {
        ds["metadata"]["name"] for ds in json.loads(kubectl("get", "ds", "-n", "kube-system", "-o", "json"))["items"]
    }
    assert {"multus", "whereabouts"} <= daemonsets and "rdma-shared-device-plugin" not in daemonsets, daemonsets


def test_workers_advertise_the_stand_in_devices(lab):
    nodes = {node["metadata"]["name"]: node for node in json.loads(kubectl("get", "nodes", "-o", "json"))["items"]}
    for name in WORKERS:
        allocatable = nodes[name]["status"]["allocatable"]
        assert (allocatable.get("nvidia.com/gpu"), allocatable.get("rdma/rail0")) == ("2", "4"), name
    assert "nvidia.com/gpu" not in nodes["lab-cp-01"]["status"]["allocatable"]
    for name in WORKERS:  # served from the host: one process per worker, under its pidfile
        pid = (STATE / name / "device-plugins.pid").read_text().strip()
        assert "lab device-plugins" in Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")


def test_mpijob_is_gang_scheduled_across_two_nodes(lab):
    out = lab["up"]
    assert "lab: MPIJob Succeeded after" in out
    assert re.search(r"^summary ranks=2 .* result=ok$", out, re.M)
    table = dict(re.findall(r"^(lab-node-0[12])\s+(.*)$", out, re.M))
    assert sorted(table) == list(WORKERS), out[-3000:]
    assert all(row.rstrip().endswith("ok") for row in table.values())
    for row in table.values():  # what Allocate gave each worker: one GPU and one rdma/rail0 device
        assert re.search(r"\bNVIDIA_VISIBLE_DEVICES=gpu-[01] RAILFORGE_RDMA_DEVICES=rail0-[0-3]\b", row), row
    # each worker's address on the rail (net1, by Multus and whereabouts): two of the rail's range
    addresses = {ipaddress.ip_address(re.search(r"\s(\d+\.\d+\.\d+\.\d+)\s", row)[1]) for row in table.values()}
    assert len(addresses) == 2 and all(address in RAIL_CIDR for address in addresses), table
    assert "lab: bound by railforge; 2 worker nodes" in out


def test_second_run_and_check_run_change_nothing(lab):
    vars_file = f"@{STATE / 'vars.yml'}"
    for extra in ([], ["--check"]):
        result = run("ansible-playbook", "-i", INVENTORY, "-e", vars_file, *extra, "playbooks/kubernetes.yml")
        counts = recap(result.stdout)
        assert sorted(counts) == sorted(NODES)
        assert {host: c["changed"] for host, c in counts.items()} == dict.fromkeys(NODES, 0), result.stdout[-4000:]
        assert not re.search(r"changed: \[\S+\] => .*kubeadm (init|join)", result.stdout)


def test_down_leaves_nothing_behind(lab):
    run("scripts/lab.sh", "down")
    containers = run("podman", "ps", "-a", "--format", "{{.Names}}").stdout.split()
    volumes = run("podman", "volume", "ls", "--format", "{{.Name}}").stdout.split()
    networks = run("podman", "network", "ls", "--format", "{{.Name}}").stdout.split()
    assert not [name for name in containers + volumes if name.startswith("lab-")]
    assert "railforge-lab" not in networks
    assert sysctls() == lab["sysctls"]
    assert not STATE.exists() and not (ROOT / "inventories/lab/artifacts").exists()
