"""The lab (`make lab`) end to end, as CI runs it: the example inventory's cluster, scaled down (one control plane, two
DGX H100 nodes, the storage node: inventories/lab/overlay.yml), in Podman node containers made into a Kubernetes
cluster by playbooks/site.yml (kubeadm from the local signed apt repository, every image preloaded: nothing pulled),
the two workers DGX H100-shaped (a simulated tree each) with every hardware role of the node stage installed from the
signed stand-in vendor repository, their hardware facts gathered by the facts play and turned into 8 rail networks,
node labels and the node class's NCCL settings, the scheduler and the MPI operator deployed by their roles, Multus
and whereabouts by the network stage, the GPUs and RDMA devices the facts found served to the workers' kubelets by
the device-plugin stand-in, and an MPIJob gang-scheduled by railforge whose two workers run on two nodes of one leaf,
each with 8 GPUs, a device of every rail, an address on every rail network and the class's NCCL settings;
validate.yml runs its node checks and its benchmark's CPU fallback (the allreduce across the two workers; the
ResNet-50 job is the test bed's), quarantines a node that fails a check and releases it; then a second run and a
check run change nothing; flannel routes every node's pod range to the others; two more control planes are added by
playbooks/scale.yml without a change on the running hosts, whose flannel routes the new pod ranges, and are taken out
again by playbooks/reset.yml; and `lab.sh down` leaves nothing."""

import contextlib
import functools
import ipaddress
import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest
import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client import ApiException

from railforge.k8s.quantity import parse_quantity
from railforge.lab import JOB_NAME, VERSIONS_FILE, render_job
from railforge.testbed.build import KUBERNETES, pinned_versions, previous_patch

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = "inventories/lab/hosts.yml"  # written by lab.sh up: the example's, cut, plus inventories/lab/overlay.yml
KUBECONFIG = ROOT / "inventories/lab/artifacts/admin.conf"  # the admin kubeconfig lab.sh up fetches
OVERLAY = yaml.safe_load((ROOT / "inventories/lab/overlay.yml").read_text())
HOSTS = (*OVERLAY["hosts"], *OVERLAY["scale_hosts"])  # each a node container of its name
NODES = ("cp-01", "dgx-01", "dgx-02")  # the example's hosts the lab's cluster has (Kubernetes node names)
WORKERS = ("dgx-01", "dgx-02")
STORAGE = "stor-01"  # the example's storage node: the node stage only
LAB_CIDR = ipaddress.ip_network("10.89.50.0/24")  # the nodes' network, lab.sh's subnet
# rail_networks_cidrs of inventories/lab (the example's)
RAIL_CIDRS = [ipaddress.ip_network(f"10.{200 + rail}.0.0/24") for rail in range(8)]
GPUS = 8  # a DGX H100's, on each worker
PINNED = KUBERNETES.version
PREVIOUS_PATCH = previous_patch(PINNED) or ""  # what `lab.sh up --previous-patch` installs (a stand-in)
STATE = Path("/run/railforge-lab")
SYSCTLS = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "fs.inotify.max_user_instances",
)
ENV = {**os.environ, "CONTAINERS_CONF": str(ROOT / "molecule/containers.conf"), "ANSIBLE_NOCOLOR": "1"}

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the lab runs privileged Podman containers (root)")


def run(*argv: str, check: bool = True, input_text: str | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, cwd=ROOT, env=ENV, capture_output=True, text=True, check=False, input=input_text)
    if check and result.returncode:
        raise AssertionError(
            f"{' '.join(argv)} failed ({result.returncode}):\n{result.stdout[-6000:]}{result.stderr[-3000:]}"
        )
    return result


def kubectl(*argv: str) -> str:
    return run("podman", "exec", "cp-01", "kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", *argv).stdout


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


def addresses(network: ipaddress.IPv4Network) -> list[str]:
    """'interface address/prefix' of every host address in network."""
    shown = run("ip", "-o", "-4", "address", "show", "to", str(network)).stdout
    return [f"{fields[1]} {fields[3]}" for fields in map(str.split, shown.splitlines())]


def test_down_removes_a_bridge_an_earlier_lab_network_left_and_nothing_else():
    """Runs before the lab is up: a Podman-named bridge with the lab's gateway address and no network of its own
    (what killed node containers leave) is removed; a bridge with another address is not."""
    stale, other = ("podman90", "10.89.50.1/24"), ("podman91", "10.89.52.1/24")
    for bridge, address in (stale, other):
        run("ip", "link", "add", bridge, "type", "bridge")
        run("ip", "address", "add", address, "dev", bridge)
    try:
        down = run("scripts/lab.sh", "down")
        assert "lab: removed podman90, a bridge an earlier Podman network left with 10.89.50.1/24" in down.stdout
        assert addresses(LAB_CIDR) == []
        assert addresses(ipaddress.ip_network("10.89.52.0/24")) == ["podman91 10.89.52.1/24"]
    finally:
        for bridge, _ in (stale, other):
            run("ip", "link", "delete", bridge, check=False)


@pytest.fixture(scope="module")
def lab():
    before = sysctls()
    run("scripts/lab.sh", "down")
    try:
        up = run("scripts/lab.sh", "up", "--previous-patch")  # the test below upgrades it to the pin
        print(up.stdout[up.stdout.find("RAILFORGE SUMMARY") :])  # the timings, the job and its table (pytest -s)
        yield {"up": up.stdout, "sysctls": before}
    finally:
        run("scripts/lab.sh", "down", check=False)


def upgrade(*options: str) -> subprocess.CompletedProcess:
    """playbooks/upgrade.yml against the lab and its added control planes (to the pin unless the options say
    otherwise); not checked."""
    return run("ansible-playbook", *SCALE_INVENTORIES, *options, "playbooks/upgrade.yml", check=False)


def kubelet_versions() -> set[str]:
    return {
        node["status"]["nodeInfo"]["kubeletVersion"]
        for node in json.loads(kubectl("get", "nodes", "-o", "json"))["items"]
    }


def pod_ranges() -> dict[str, str]:
    """node -> its pod range (spec.podCIDR)."""
    return {
        node["metadata"]["name"]: node["spec"]["podCIDR"]
        for node in json.loads(kubectl("get", "nodes", "-o", "json"))["items"]
    }


def within(seconds: float, condition) -> bool:
    """Whether condition() comes true within the given seconds (asked every second)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(1)
    return True


def flannel_routes(host: str) -> set[str]:
    """The destinations a node routes through flannel's VXLAN device."""
    routes = run("podman", "exec", host, "ip", "-4", "route", "show", "dev", "flannel.1").stdout
    return {line.split()[0] for line in routes.splitlines() if line.strip()}


SCALE_INVENTORIES = ("-i", INVENTORY, "-i", "inventories/lab/scale.yml")
# Two more control planes (etcd wants an odd number): started by `lab.sh add`, joined by scale.yml, removed again by
# reset.yml.
ADDED = ["cp-02", "cp-03"]


def changes(output: str) -> list[tuple[str, str]]:
    """(host, task or handler) for each change a playbook run reported, in the order it ran (delegated results count
    for the host the task ran for, as in the PLAY RECAP; a loop's items count once, as there)."""
    reported: list[tuple[str, str]] = []
    task = ""
    for line in output.splitlines():
        if header := re.match(r"(?:TASK|RUNNING HANDLER) \[(.+)\] \**$", line):
            task = header.group(1)
        elif (host := re.match(r"changed: \[([^\]\s]+)", line)) and (host.group(1), task) not in reported[-1:]:
            reported.append((host.group(1), task))
    return reported


def changed_tasks(output: str) -> dict[str, list[str]]:
    """host -> the tasks (and handlers) that reported it changed, in order."""
    changed: dict[str, list[str]] = {}
    for host, task in changes(output):
        changed.setdefault(host, []).append(task)
    return changed


def etcd_members() -> list[str]:
    """The names of etcd's members, as the first control plane's etcd lists them."""
    listed = kubectl(
        "exec", "--namespace", "kube-system", "etcd-cp-01", "--", "etcdctl", "--endpoints=https://127.0.0.1:2379",
        "--cacert=/etc/kubernetes/pki/etcd/ca.crt", "--cert=/etc/kubernetes/pki/etcd/server.crt",
        "--key=/etc/kubernetes/pki/etcd/server.key", "member", "list", "--write-out=json",
    )  # fmt: skip
    return sorted(member.get("name", "") for member in json.loads(listed)["members"])


def test_scale_joins_two_control_planes_and_leaves_the_running_hosts_alone(lab):
    """At the cluster's release (the patch before the pin), so that the upgrade after it moves three control
    planes: one by `kubeadm upgrade apply`, two by `kubeadm upgrade node`."""
    run("scripts/lab.sh", "add", *ADDED)
    joined = {"kubernetes_scale_hosts": ADDED, "kubernetes_version": PREVIOUS_PATCH}
    scale = ("-e", json.dumps(joined), "playbooks/scale.yml")
    result = run("ansible-playbook", *SCALE_INVENTORIES, *scale)
    counts, changed = recap(result.stdout), changed_tasks(result.stdout)
    assert sorted(counts) == sorted([*NODES, *ADDED])
    assert re.search(r"^changed: \[cp-0[23] -> cp-01\(10\.89\.50\.11\)\]", result.stdout, re.M)  # the token, on cp-01
    for host in NODES:  # nothing changed on the running hosts
        assert counts[host]["changed"] == 0 and host not in changed, (host, changed.get(host), result.stdout[-4000:])
    ranges = pod_ranges()
    lab["added_ranges"] = {ranges[name] for name in ADDED}
    for host in NODES:  # their flannel routes the new nodes' pod ranges all the same (once the new flannel runs)
        # the new nodes' flannel pods start on a 2-core host running five node containers: minutes, not seconds
        assert within(240, lambda host=host: lab["added_ranges"] <= flannel_routes(host)), (host, ranges)
    for name in ADDED:
        node = json.loads(kubectl("get", "node", name, "-o", "json"))
        assert "node-role.kubernetes.io/control-plane" in node["metadata"]["labels"]
        assert next(c for c in node["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
        for component in ("etcd", "kube-apiserver"):
            pod = json.loads(kubectl("get", "pod", "-n", "kube-system", f"{component}-{name}", "-o", "json"))
            assert pod["status"]["phase"] == "Running", (name, component)
    assert etcd_members() == ["cp-01", *ADDED]


def test_upgrade_moves_the_cluster_to_the_pin_node_by_node_with_its_gang_whole(lab):
    """The lab came up at the stand-in of the patch release before the pin (`lab.sh up --previous-patch`) and has
    three control planes (the test above). A downgrade is refused before anything changes (a skipped minor release
    is the same check: tests/unit/roles/test_kubernetes_input.py); then upgrade.yml moves cp-01 (`kubeadm upgrade
    apply`), cp-02 and cp-03 one after the other (`kubeadm upgrade node`) and then the workers (drained, their gang
    restarted whole by railforge, upgraded, uncordoned) to the pin, holds the packages again, and a second run
    changes nothing."""
    major, minor, _ = (int(part) for part in PINNED.split("."))
    refused = upgrade("-e", f"kubernetes_version={major}.{minor - 1}.0")
    assert refused.returncode != 0 and "kubeadm does not downgrade" in " ".join(refused.stdout.split()), refused.stdout
    assert all(counts["changed"] == 0 for counts in recap(refused.stdout).values()), refused.stdout[-3000:]
    checked = upgrade("--check")
    assert checked.returncode == 0, checked.stdout[-6000:]
    assert kubelet_versions() == {f"v{PREVIOUS_PATCH}"}  # the check run changed nothing
    samples: list[dict[str, str | None]] = []
    job = idle_job("upgraded")
    job["spec"]["runPolicy"]["backoffLimit"] = 6  # its launcher's Job makes a new launcher after the drain evicts it
    with submitted(job):
        running = polled(lambda: job_pods("upgraded", "uid"), lambda pods: len(pods) == 3 and all(pods.values()), 180)
        assert len(running) == 3 and all(running.values()), running
        before = set(running)
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(1):
                # refused, or no answer, while kubeadm restarts the API server
                with contextlib.suppress(ApiException, urllib3.exceptions.HTTPError):
                    samples.append(job_pods("upgraded"))

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            result = upgrade()
        finally:
            stop.set()
            sampler.join()
        assert result.returncode == 0, result.stdout[-6000:]
        kubeadm = [(host, task.split("(kubeadm upgrade ")[1].split(")")[0])
                   for host, task in changes(result.stdout) if "(kubeadm upgrade " in task]  # fmt: skip
        assert kubeadm[:3] == [("cp-01", "apply"), ("cp-02", "node"), ("cp-03", "node")], kubeadm
        assert sorted(kubeadm[3:]) == [(worker, "node") for worker in WORKERS], kubeadm
        # the workers were drained: the gang was restarted, and comes back whole once they are uncordoned
        after = polled(lambda: job_pods("upgraded", "uid"), lambda pods: len(pods) == 3 and all(pods.values()), 300)
        assert len(after) == 3 and all(after.values()) and not set(after) & before, (before, after)
    # half a gang (some pods bound, some waiting) lasts no longer than railforge's restart of it takes
    longest = streak = 0
    for pods in samples:
        streak = streak + 1 if 0 < sum(1 for node in pods.values() if node) < len(pods) else 0
        longest = max(longest, streak)
    assert samples and longest <= 15, samples
    assert kubelet_versions() == {f"v{PINNED}"}
    nodes = json.loads(kubectl("get", "nodes", "-o", "json"))["items"]
    assert not [node["metadata"]["name"] for node in nodes if node["spec"].get("unschedulable")]
    assert not [node for node in nodes if "railforge.io/upgrade-cordoned" in node["metadata"].get("annotations", {})]
    for control_plane in ("cp-01", *ADDED):
        for component in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
            pod = json.loads(kubectl("get", "pod", "-n", "kube-system", f"{component}-{control_plane}", "-o", "json"))
            assert pod["spec"]["containers"][0]["image"].endswith(f"/{component}:v{PINNED}"), pod["metadata"]["name"]
    for name in (*NODES, *ADDED):
        listed = run("podman", "exec", name, "dpkg-query", "-W", "-f", "${Package}=${Version}\n", "kubeadm",
                     "kubelet", "kubectl").stdout.split()  # fmt: skip
        revision = pinned_versions()["versions_kubernetes_package_revision"]
        assert sorted(listed) == [f"{package}={PINNED}-{revision}" for package in ("kubeadm", "kubectl", "kubelet")]
        held = run("podman", "exec", name, "apt-mark", "showhold").stdout.split()
        assert {"kubeadm", "kubelet", "kubectl"} <= set(held), name
    again = upgrade()
    assert again.returncode == 0 and all(c["changed"] == 0 for c in recap(again.stdout).values()), again.stdout[-4000:]


def test_reset_takes_one_control_plane_out_and_a_lost_one_without_contacting_it(lab):
    """cp-02 is reset; cp-03 is gone for good (its container killed): kubernetes_reset_lost_hosts takes it out
    through cp-01 (its etcd member first, while etcd has a majority of live members), never reaching it."""
    run("podman", "kill", "cp-03")
    hosts = {"kubernetes_reset_hosts": ["cp-02"], "kubernetes_reset_lost_hosts": ["cp-03"]}
    reset = ("-e", json.dumps(hosts), "playbooks/reset.yml")
    run("ansible-playbook", *SCALE_INVENTORIES, "--check", *reset)
    assert etcd_members() == ["cp-01", *ADDED]  # the check run changed nothing
    result = run("ansible-playbook", *SCALE_INVENTORIES, *reset)
    counts = recap(result.stdout)
    assert {host: counts[host]["changed"] for host in NODES} == dict.fromkeys(NODES, 0), result.stdout[-4000:]
    assert counts["cp-03"]["unreachable"] == 0 and counts["cp-03"]["changed"] >= 2, result.stdout[-4000:]
    assert sorted(kubectl("get", "nodes", "-o", "name").split()) == [f"node/{name}" for name in sorted(NODES)]
    assert etcd_members() == ["cp-01"]
    assert kubectl("get", "pods", "--all-namespaces", "--field-selector", "spec.nodeName=cp-03", "-o", "name") == ""
    for host in NODES:  # flannel dropped the routes to the removed nodes' pod ranges
        assert within(120, lambda host=host: not lab["added_ranges"] & flannel_routes(host)), host
    node = ("podman", "exec", "cp-02")
    assert counts["cp-02"]["changed"] > 0
    assert run(*node, "systemctl", "is-active", "kubelet", check=False).stdout.strip() != "active"
    assert run(*node, "test", "-e", "/etc/kubernetes", check=False).returncode == 1
    assert run(*node, "dpkg", "--status", "kubeadm", check=False).returncode != 0
    backed_up = run(*node, "find", "/var/backups/railforge-kubernetes", "-type", "f").stdout.split()
    for path in ("/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/kubelet.conf", "/etc/containerd/config.toml"):
        assert [f for f in backed_up if f.endswith(path)], (path, backed_up)
    again = recap(run("ansible-playbook", *SCALE_INVENTORIES, *reset).stdout)
    assert {host: c["changed"] for host, c in again.items()} == dict.fromkeys([*NODES, *ADDED], 0)


def test_cluster_is_made_by_kubeadm_from_local_packages_and_preloaded_images(lab):
    nodes = json.loads(kubectl("get", "nodes", "-o", "json"))["items"]
    assert sorted(node["metadata"]["name"] for node in nodes) == sorted(NODES)
    for node in nodes:
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True", node["metadata"]["name"]
        assert node["status"]["nodeInfo"]["kubeletVersion"] == f"v{PINNED}"  # after the upgrade test
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"] == "containerd://2.3.7"
    kubernetes = {"containerd.io", "cri-tools", "kubeadm", "kubectl", "kubelet", "kubernetes-cni"}
    for name in NODES:  # Kubernetes comes from the local repository, and its packages are held
        sources = run("podman", "exec", name, "cat", "/etc/apt/sources.list.d/kubernetes.list").stdout
        assert "file:/srv/railforge-apt/" in sources and "signed-by=" in sources
        held = set(run("podman", "exec", name, "apt-mark", "showhold").stdout.split())
        # the workers' NVIDIA stack too, from the stand-in vendor repository
        assert (
            held == kubernetes if name not in WORKERS else {"nvidia-open", "nvidia-fabricmanager"} | kubernetes <= held
        )
    # the example's storage node: the node stage's OS part (with the example's extra packages) and nothing more
    installed = set(run("podman", "exec", STORAGE, "dpkg-query", "-W", "-f", "${Package}\\n").stdout.split())
    assert {"chrony", "htop", "tmux"} <= installed, installed
    stacks = ("kube", "containerd", "nvidia", "libnvidia", "cuda", "datacenter-gpu", "doca", "mlnx", "gdrcopy")
    assert not [package for package in installed if package.startswith(stacks)], installed
    pulls = kubectl("get", "events", "-A", "--field-selector", "reason=Pulling", "-o", "name")
    assert pulls.strip() == "", f"images were pulled, not preloaded: {pulls}"
    system = json.loads(kubectl("get", "pods", "-n", "kube-system", "-o", "json"))["items"]
    assert {"kube-dns", "kube-proxy"} <= {pod["metadata"].get("labels", {}).get("k8s-app") for pod in system}
    assert all(pod["status"]["phase"] == "Running" for pod in system), [p["metadata"]["name"] for p in system]
    daemonsets = {
        ds["metadata"]["name"] for ds in json.loads(kubectl("get", "ds", "-n", "kube-system", "-o", "json"))["items"]
    }
    assert {"multus", "whereabouts"} <= daemonsets, daemonsets
    # the vendors' device plugins and exporter need real devices: the stand-in serves the devices instead
    assert not {"rdma-shared-device-plugin", "nvidia-device-plugin", "dcgm-exporter"} & daemonsets, daemonsets


def test_up_says_what_each_stage_took_and_which_kubectl_to_use(lab):
    out = lab["up"]
    stages = re.search(r"^stage times: (.*)$", out, re.M)
    assert stages, out[-3000:]
    took = dict(re.findall(r"(\S+) (\d+) s", stages[1]))
    assert {"preflight", "nodes", "kubernetes", "network", "devices", "scheduler", "validate"} <= set(took), took
    steps = re.findall(r"^lab: (builds .*|node containers|site\.yml|device plugins|MPIJob) (\d+) s$", out, re.M)
    assert [step for step, _ in steps] == [
        "builds (node image, packages, images)",
        "node containers",
        "site.yml",
        "device plugins",
        "MPIJob",
    ], out[-3000:]
    assert f"export KUBECONFIG={KUBECONFIG}" in out
    kubectl_binary = re.search(r"^  (/\S+/kubectl) get nodes$", out, re.M)
    assert kubectl_binary, out[-3000:]
    version = json.loads(run(kubectl_binary[1], "version", "--client", "-o", "json").stdout)
    assert version["clientVersion"]["gitVersion"] == f"v{PREVIOUS_PATCH}"  # the cluster's when up made it


def test_ansible_reaches_each_node_over_ssh_by_its_own_checked_host_key(lab):
    """As an operator's servers: SSH with the lab's key as the example's ansible_user, who may sudo (the playbooks
    become root where they need to); each node's host key its own and checked; no passwords, no root logins."""
    hostvars = json.loads(run("ansible-inventory", "-i", INVENTORY, "--list").stdout)["_meta"]["hostvars"]
    example = yaml.safe_load((ROOT / "inventories/example/group_vars/all/cluster.yml").read_text())["ansible_user"]
    keys = {}
    for host in (*NODES, STORAGE):
        address, user = hostvars[host]["ansible_host"], hostvars[host]["ansible_user"]
        assert user == example != "root"
        ssh = ("ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes")
        known = (
            *ssh,
            "-i",
            hostvars[host]["ansible_ssh_private_key_file"],
            *hostvars[host]["ansible_ssh_common_args"].split(),
        )
        assert run(*known, "-l", user, address, "hostname; id -un; sudo -n id -u").stdout.split() == [host, user, "0"]
        as_root = run(*known, "-l", "root", address, "true", check=False)
        assert as_root.returncode == 255 and "Permission denied" in as_root.stderr, as_root.stderr
        unknown = run(*ssh, "-l", user, "-o", "UserKnownHostsFile=/dev/null", address, "true", check=False)
        assert unknown.returncode == 255 and "Host key verification failed" in unknown.stderr, unknown.stderr
        keys[host] = run("podman", "exec", host, "ssh-keygen", "-l", "-f", "/etc/ssh/ssh_host_ed25519_key").stdout
        config = run("podman", "exec", host, "sshd", "-T").stdout.splitlines()
        assert {"passwordauthentication no", "permitrootlogin no"} <= set(config)
    assert len(set(keys.values())) == len(keys), keys


def test_flannel_routes_every_other_nodes_pod_range_over_vxlan(lab):
    ranges = pod_ranges()

    def flannel() -> dict:
        return json.loads(kubectl("get", "ds", "-n", "kube-flannel", "flannel", "-o", "json"))["status"]

    # the flannel pod of the control plane reset before (its node deleted, the pod left to the pod garbage
    # collector) counts until the collector removes it: up to about a minute
    assert within(120, lambda: flannel()["numberReady"] == len(NODES)), flannel()
    for host in NODES:
        assert sorted(flannel_routes(host)) == sorted(cidr for node, cidr in ranges.items() if node != host), host
        conflist = json.loads(run("podman", "exec", host, "cat", "/etc/cni/net.d/10-railforge-pods.conflist").stdout)
        bridge = conflist["plugins"][0]
        assert bridge["ipam"]["ranges"] == [[{"subnet": ranges[host]}]]
        eth0 = int(run("podman", "exec", host, "cat", "/sys/class/net/eth0/mtu").stdout)
        assert bridge["mtu"] == eth0 - 50  # room for the VXLAN encapsulation


def test_the_workers_hardware_facts_become_networks_labels_nccl_settings_and_devices(lab):
    """Read by the facts play from each worker's simulated DGX H100 and kept, never written in the inventory: 8 GPUs
    and 8 InfiniBand rails in GPU order; the network stage's 8 rail networks over the facts' netdevs with the
    example's ranges, the nodes' labels (GPU product, rails, NVLink, leaf and spine from railforge_topology) and the
    class's NCCL ConfigMap; the device-plugin stand-in advertises what the facts found."""

    def keys(node) -> set[str]:
        if isinstance(node, dict):
            return set(node) | {key for value in node.values() for key in keys(value)}
        return set().union(*map(keys, node)) if isinstance(node, list) else set()

    inventory = yaml.safe_load((ROOT / INVENTORY).read_text())
    assert not {"railforge_hw", "railforge_hw_source"} & keys(inventory), "hardware facts written by hand"
    nodes = {node["metadata"]["name"]: node for node in json.loads(kubectl("get", "nodes", "-o", "json"))["items"]}
    for name in WORKERS:
        facts = json.loads((ROOT / f"inventories/lab/artifacts/hw/{name}.json").read_text())
        assert (facts["gpu_count"], facts["rail_count"], facts["nvlink"]["nvswitch_count"]) == (GPUS, 8, 4), name
        assert [rail["hca"] for rail in facts["rails"]] == [
            "mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_8", "mlx5_9", "mlx5_10"
        ]  # fmt: skip
        allocatable = nodes[name]["status"]["allocatable"]
        assert allocatable.get("nvidia.com/gpu") == str(GPUS), name
        assert [allocatable.get(f"rdma/rail{rail}") for rail in range(8)] == ["4"] * 8, name
        labels = nodes[name]["metadata"]["labels"]
        print(name, {key: value for key, value in labels.items() if "railforge" in key or "nvidia" in key})
        assert labels["railforge.io/leaf"] == "leaf-01" and labels["railforge.io/spine"] == "spine-a", labels
        assert labels["railforge.io/nccl-class"], labels
        # the product the driver (the stand-in's nvidia-smi) names, as GPU feature discovery labels it
        assert facts["gpu_products"] == ["NVIDIA H100 80GB HBM3"], facts["gpu_products"]
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3", labels
    assert "nvidia.com/gpu" not in nodes["cp-01"]["status"]["allocatable"]
    networks = json.loads(kubectl("get", "network-attachment-definitions", "-n", "railforge-network", "-o", "json"))
    configs = {nad["metadata"]["name"]: json.loads(nad["spec"]["config"]) for nad in networks["items"]}
    assert sorted(configs) == sorted(f"rail{rail}" for rail in range(8)), sorted(configs)
    facts = json.loads((ROOT / f"inventories/lab/artifacts/hw/{WORKERS[0]}.json").read_text())
    for rail in range(8):
        config = configs[f"rail{rail}"]
        assert (config["type"], config["master"]) == ("macvlan", facts["rails"][rail]["netdev"]), config
        assert config["ipam"]["range"] == str(RAIL_CIDRS[rail]), config
    (nccl,) = json.loads(kubectl("get", "configmaps", "-n", "railforge-network", "-l", "railforge.io/nccl-class",
                                 "-o", "json"))["items"]  # fmt: skip
    assert nccl["data"]["NCCL_IB_HCA"].count("mlx5_") == 8, nccl["data"]
    for name in WORKERS:  # served from the host: one process per worker, under its pidfile
        pid = (STATE / name / "device-plugins.pid").read_text().strip()
        assert "lab device-plugins" in Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")


def test_mpijob_is_gang_scheduled_across_two_nodes(lab):
    out = lab["up"]
    assert "lab: MPIJob Succeeded after" in out
    assert re.search(r"^summary ranks=2 .* result=ok$", out, re.M)
    table = dict(re.findall(r"^(dgx-0[12])\s+(.*)$", out, re.M))
    assert sorted(table) == list(WORKERS), out[-3000:]
    assert all(row.rstrip().endswith("ok") for row in table.values())
    for row in table.values():  # what Allocate gave each worker: every GPU and a device of each rail
        assert re.search(r"\bNVIDIA_VISIBLE_DEVICES=(gpu-[0-7],){7}gpu-[0-7]\b", row), row
        assert len(re.findall(r"\bRAILFORGE_RDMA_RAIL[0-7]=rail[0-7]-[0-3]\b", row)) == 8, row
        # the node class's NCCL settings, bootstrapping over the pod's own interface on the cluster network
        assert re.search(r"\bNCCL_IB_HCA=\S*mlx5_0\S* NCCL_SOCKET_IFNAME==eth0\b", row), row
    # each worker's address on every rail (net1 ... net8, by Multus and whereabouts), in the rail's range
    for row in table.values():
        (listed,) = re.findall(r"\s(\d+\.\d+\.\d+\.\d+(?:,\d+\.\d+\.\d+\.\d+)*)\s", row)
        addresses = [ipaddress.ip_address(address) for address in listed.split(",")]
        assert [address in cidr for address, cidr in zip(addresses, RAIL_CIDRS, strict=True)] == [True] * 8, row
    assert "lab: bound by railforge; 2 worker nodes" in out


@contextlib.contextmanager
def submitted(job: dict):
    """The MPIJob applied to the lab, deleted again at the end."""
    admin = ("podman", "exec", "-i", "cp-01", "kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf")
    subprocess.run(
        [*admin, "apply", "-f", "-"], input=json.dumps(job), env=ENV, capture_output=True, check=True, text=True
    )
    try:
        yield
    finally:
        kubectl(
            "delete", "mpijob", job["metadata"]["name"], "--namespace", job["metadata"]["namespace"], "--wait=false"
        )


def idle_job(name: str) -> dict:
    """An MPIJob of two 100m workers whose launcher sleeps: its gang runs until deleted."""
    job = render_job(name, "railforge-lab", 2, "100m")
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"] = ["sleep", "3600"]
    return job


@functools.cache
def lab_api(kubeconfig: str) -> client.CoreV1Api:
    """The lab's API server from this machine, by the admin kubeconfig `lab.sh up` fetched (its text: a new lab, a new
    client). In-process: a sampler asking every second through `podman exec ... kubectl` would spend about a third of
    a core on processes while the upgrade it watches wants both."""
    return client.CoreV1Api(config.new_client_from_config_dict(yaml.safe_load(kubeconfig)))


def job_pods(name: str, key: str = "name") -> dict[str, str | None]:
    """pod (its name, or its uid with key="uid") -> its node (None: unbound), of the job's Running or Pending pods
    that are not being deleted."""
    api = lab_api(KUBECONFIG.read_text())
    listed = api.list_namespaced_pod(
        "railforge-lab", label_selector=f"{JOB_NAME}={name}", _preload_content=False, _request_timeout=10
    )
    return {
        pod["metadata"][key]: pod["spec"].get("nodeName")
        for pod in json.loads(listed.data)["items"]
        if pod["status"].get("phase") in ("Pending", "Running") and not pod["metadata"].get("deletionTimestamp")
    }


def polled(read, done, timeout: float) -> str:
    """read() every 2 s until done(what it read) or ``timeout`` seconds; what it read last."""
    deadline = time.monotonic() + timeout
    while not done(value := read()) and time.monotonic() < deadline:
        time.sleep(2)
    return value


def test_an_mpijob_whose_workers_cannot_spread_waits_and_says_why(lab):
    """Three workers of the template, whose pod anti-affinity allows one per node, on two worker nodes: railforge
    binds none of the gang and its PodGroup names the rule. (The job above, with workers small enough to share a
    node, ran on two: the anti-affinity kept them apart.)"""
    with submitted(render_job("wide", "railforge-lab", 3, "100m")):
        reason_of_wide = (
            "get", "podgroups.scheduling.x-k8s.io", "wide", "--namespace", "railforge-lab", "--ignore-not-found",
            "-o", "jsonpath={.metadata.annotations.railforge\\.io/reason}",
        )  # fmt: skip
        reason = polled(lambda: kubectl(*reason_of_wide), lambda reason: "at most 1 per node" in reason, 120)
        assert reason == (
            "does not fit even with nothing running: needs 3 pods at most 1 per node "
            "(spec.affinity.podAntiAffinity on kubernetes.io/hostname); the nodes it may use take 2"
        ), reason
        pods = json.loads(kubectl("get", "pods", "--namespace", "railforge-lab", "-o", "json"))["items"]
        wide = {
            pod["metadata"]["name"]: pod["spec"].get("nodeName")
            for pod in pods
            if pod["metadata"]["name"].startswith("wide-")
        }
        assert len(wide) == 4 and not any(wide.values()), wide  # the launcher and three workers, none bound


def test_an_mpijob_whose_worker_fails_is_restarted_within_its_owners_limit_then_keeps_its_evidence(lab):
    """Its workers print why and exit 3. The MPIJob allows one restart (runPolicy.backoffLimit 1 on the launcher's
    Job, which counts the launcher a restart deletes): railforge restarts the gang whole once, and at the second
    failure fails it instead, deleting only the pods still running; the MPI operator fails the job. The exit code
    and the worker's line stay readable: on the MPIJob's Events (kubectl describe), in the dashboard's decisions
    (its /api/state, through the API server's service proxy) and in the failed worker's own log. The scheduler, run
    from its image by the role, leads under the role's Lease RBAC and serves its page and /metrics."""
    job = render_job("broken", "railforge-lab", 2, "100m")
    job["spec"]["runPolicy"]["backoffLimit"] = 1
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["command"] = ["/bin/sh", "-c", "echo 'rank 1: bad shard 17'; exit 3"]
    del worker["readinessProbe"]
    proxy = "/api/v1/namespaces/railforge-system/services/railforge-scheduler:http/proxy/api/state"

    def decisions() -> list[dict]:
        """The gang's restarts and failures on the dashboard, newest first."""
        recent = json.loads(kubectl("get", "--raw", proxy))["recent"]
        return [d for d in recent if d["gang"] == "railforge-lab/broken" and d["kind"] in ("restart", "fail")]

    with submitted(job):
        # the restart's backoff (restart_backoff_base, 30 s) and a second start come between the two
        ours = polled(decisions, lambda ours: any(d["kind"] == "fail" for d in ours), 300)
        assert [d["kind"] for d in ours] == ["fail", "restart"], ours
        assert all("container worker exited 3 (Error)" in d["detail"] for d in ours), ours
        assert "which allows 1 restart (1 done); the failure is left to it" in ours[0]["detail"], ours
        described = kubectl("describe", "mpijob", "broken", "--namespace", "railforge-lab")
        assert "MemberFailed" in described and "container worker exited 3 (Error)" in described, described
        assert "rank 1: bad shard 17" in described, described
        listed = json.loads(
            kubectl("get", "pods", "--namespace", "railforge-lab", "-l", f"{JOB_NAME}=broken", "-o", "json")
        )
        failed = [pod["metadata"]["name"] for pod in listed["items"] if pod["status"].get("phase") == "Failed"]
        assert failed, listed
        assert "rank 1: bad shard 17" in kubectl("logs", failed[0], "--namespace", "railforge-lab")
    service = "/api/v1/namespaces/railforge-system/services/railforge-scheduler:http/proxy"
    metrics = kubectl("get", "--raw", f"{service}/metrics")
    assert re.search(r"^railforge_leader 1\.0$", metrics, re.M), metrics[-3000:]
    assert re.search(r'^railforge_binds_total\{queue="[^"]+"\} [1-9]', metrics, re.M), metrics[-3000:]
    assert "railforge scheduler" in kubectl("get", "--raw", f"{service}/")
    holder = kubectl("get", "lease", "railforge", "-n", "railforge-system", "-o", "jsonpath={.spec.holderIdentity}")
    (pod,) = kubectl("get", "pods", "-n", "railforge-system", "-l", "app.kubernetes.io/name=railforge-scheduler",
                     "--field-selector", "status.phase=Running", "-o", "jsonpath={.items[*].metadata.name}",
                     ).split()  # fmt: skip
    assert holder == pod, (holder, pod)


def free_millicores(node: str) -> int:
    """The node's allocatable CPU less what the pods bound to it and not ended request (millicores)."""
    allocatable = parse_quantity(kubectl("get", "node", node, "-o", "jsonpath={.status.allocatable.cpu}").strip())
    pods = json.loads(
        kubectl("get", "pods", "--all-namespaces", "--field-selector", f"spec.nodeName={node}", "-o", "json")
    )
    requested = sum(
        parse_quantity(container.get("resources", {}).get("requests", {}).get("cpu", "0"))
        for pod in pods["items"]
        if pod["status"].get("phase") not in ("Succeeded", "Failed")
        for container in pod["spec"]["containers"]
    )
    return int((allocatable - requested) * 1000)


def test_validate_benchmarks_across_the_two_workers(lab, tmp_path):
    """validate.yml as `make lab-validate` runs it: the node checks, then its benchmark in mode cpu (its stand-in
    GPUs run no CUDA), the allreduce gang-scheduled by railforge over the two workers (MPI between them over flannel,
    CoreDNS naming them), and the per-node table. The ResNet-50 image is on no node (it is not one of the cluster's
    images), so its job is left out in one line, before anything is applied; the test bed trains it end to end
    (tests/k8s/test_benchmark_playbook.py), the same job on two pods that talk over the node's bridge as here over
    flannel."""
    settings = {
        # workers of 60% of what the fuller worker has free (the system pods land where the upgrade's drains left
        # them), one on each (the template's pod anti-affinity)
        "railforge_benchmark_worker_cpu": f"{int(min(map(free_millicores, WORKERS)) * 0.6)}m",
        "railforge_benchmark_timeout": 600,
        "railforge_benchmark_mode": "cpu",
        "railforge_benchmark_results": str(tmp_path / "results"),
        "railforge_benchmark_reports": str(tmp_path / "reports"),
    }
    result = run("ansible-playbook", "-i", INVENTORY, "-e", json.dumps(settings), "playbooks/validate.yml", check=False)
    logs = "".join(f"\n--- {log.name}\n{log.read_text()[-2000:]}" for log in (tmp_path / "results").rglob("*.log"))
    assert result.returncode == 0, f"{result.stdout[-6000:]}{result.stderr[-2000:]}\nlaunchers' logs:{logs}"
    output = " ".join(result.stdout.split())
    assert re.search(r"is not on node dgx-0[12], dgx-0[12]: the ResNet-50 job is left out", output), output[-4000:]
    table = output[output.rfind("TASK [Show the per-node result]") :]
    print(table)
    for worker in WORKERS:
        assert re.search(
            rf"\| {worker} \| \d+ passed, 0 failed, \d+ skipped \| - \| mpi_allreduce [^|]+\| PASS \|", table
        )
    (report,) = (tmp_path / "reports").glob("benchmark-forge-a-*.json")
    document = json.loads(report.read_text())
    assert document["failed"] == [] and [job["state"] for job in document["jobs"]["mpijobs"]] == ["Succeeded"]
    for job in document["jobs"]["mpijobs"]:
        workers = {pod: node for pod, node in job["pods"].items() if "-worker-" in pod}
        assert sorted(workers.values()) == list(WORKERS), job
    assert not document["results"].get("resnet")
    (allreduce,) = document["results"]["mpi"]
    assert allreduce["ok"] and sorted(rank["node"] for rank in allreduce["ranks"]) == list(WORKERS)
    pods = json.loads(kubectl("get", "pods", "--namespace", "railforge-benchmark", "-o", "json"))["items"]
    assert pods and {pod["spec"]["schedulerName"] for pod in pods} == {"railforge"}
    kubectl("delete", "namespace", "railforge-benchmark", "--wait=false")


def held_pod(name: str, gpus: int) -> str:
    """A pod for railforge that holds ``gpus`` stand-in GPUs until deleted (the preloaded OpenMPI image, non-root)."""
    image = yaml.safe_load(VERSIONS_FILE.read_text())["versions_openmpi_image"]
    return json.dumps({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "railforge-lab"},
        "spec": {
            "schedulerName": "railforge",
            "terminationGracePeriodSeconds": 1,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000},
            "containers": [{
                "name": "hold", "image": image, "command": ["sleep", "3600"],
                "resources": {"requests": {"cpu": "10m"}, "limits": {"nvidia.com/gpu": gpus}},
            }],
        },
    })  # fmt: skip


def test_a_node_that_fails_validation_is_quarantined_and_released(lab):
    """The health loop (issue 38) in the lab: a node check fails on dgx-02 (its persisted sysctls moved aside), and
    validate.yml quarantines it; a pod of all 8 GPUs lands on dgx-01, a second waits saying dgx-02 is
    quarantined, in `railforge queue` and on the dashboard; `railforge node release` gives the node back and the
    second starts there."""
    persisted = "/etc/sysctl.d/90-railforge-kubernetes.conf"
    kubeconfig = str(KUBECONFIG)
    run("podman", "exec", WORKERS[1], "mv", persisted, "/root/sysctls.conf")
    try:
        result = run(
            "ansible-playbook", "-i", INVENTORY, "--skip-tags", "benchmark", "playbooks/validate.yml", check=False
        )
        run("podman", "exec", WORKERS[1], "mv", "/root/sysctls.conf", persisted)
        output = " ".join(result.stdout.split())
        assert result.returncode == 2 and "node validation failed" in output, output[-4000:]
        quarantined = f"quarantine: node {WORKERS[1]} tainted railforge.io/quarantine:NoSchedule (check test_sysctls"
        assert quarantined in output and f"railforge node release {WORKERS[1]}" in output, output[-4000:]
        taints = json.loads(kubectl("get", "node", WORKERS[1], "-o", "jsonpath={.spec.taints}"))
        assert {"key": "railforge.io/quarantine", "value": "health", "effect": "NoSchedule"} in [
            {key: taint[key] for key in ("key", "value", "effect")} for taint in taints
        ], taints
        for name in ("health-first", "health-second"):
            run("podman", "exec", "-i", "cp-01", "kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf",
                "apply", "-f", "-", input_text=held_pod(name, GPUS))  # fmt: skip
        on_node = polled(
            lambda: kubectl("get", "pod", "health-first", "-n", "railforge-lab", "-o", "jsonpath={.spec.nodeName}"),
            bool,
            120,
        )
        assert on_node == WORKERS[0]
        listed = polled(
            lambda: run("railforge", "queue", "--kubeconfig", kubeconfig).stdout,
            lambda text: "health-second" in text and "quarantined" in text,
            60,
        )
        flat = " ".join(listed.split())
        assert f"node {WORKERS[1]} is quarantined (" in flat and "sysctls_persisted" in flat, listed
        proxy = "/api/v1/namespaces/railforge-system/services/railforge-scheduler:http/proxy/api/state"
        (waiting,) = [g for g in json.loads(kubectl("get", "--raw", proxy))["pending"] if "health-second" in g["gang"]]
        assert f"node {WORKERS[1]} is quarantined (" in waiting["reason"], waiting
        released = run("railforge", "node", "release", WORKERS[1], "--kubeconfig", kubeconfig)
        assert f"node {WORKERS[1]}" in released.stdout, released.stdout
        on_node = polled(
            lambda: kubectl("get", "pod", "health-second", "-n", "railforge-lab", "-o", "jsonpath={.spec.nodeName}"),
            bool,
            60,
        )
        assert on_node == WORKERS[1]
    finally:  # the lab as it was for the tests after this one
        run(
            "podman",
            "exec",
            WORKERS[1],
            "sh",
            "-c",
            f"[ -e {persisted} ] || mv /root/sysctls.conf {persisted}",
        )
        kubectl("delete", "pod", "health-first", "health-second", "-n", "railforge-lab", "--ignore-not-found")
        run("railforge", "node", "release", WORKERS[1], "--kubeconfig", kubeconfig, check=False)


def test_second_run_and_check_run_change_nothing(lab):
    for extra in ([], ["--check"]):
        result = run("ansible-playbook", "-i", INVENTORY, *extra, "playbooks/kubernetes.yml")
        counts = recap(result.stdout)
        assert sorted(counts) == sorted(NODES)
        assert {host: c["changed"] for host, c in counts.items()} == dict.fromkeys(NODES, 0), result.stdout[-4000:]
        assert not re.search(r"changed: \[\S+\] => .*kubeadm (init|join)", result.stdout)
    # another pin on the installed nodes: refused on every node before anything changes (kubeadm upgrades a cluster)
    moved = run("ansible-playbook", "-i", INVENTORY, "-e", "versions_kubernetes=1.36.4",
                "playbooks/kubernetes.yml", check=False)  # fmt: skip
    assert moved.returncode == 2, moved.stdout[-4000:]
    assert {host: c["changed"] for host, c in recap(moved.stdout).items()} == dict.fromkeys(NODES, 0)
    for host in NODES:
        assert re.search(
            rf"versions_kubernetes: {host} has kubelet 1\.36\.5-\S+ -> 1\.36\.4-\S+; kubeadm", moved.stdout
        )


def test_a_lost_worker_is_taken_out_and_its_gang_restarted_whole(lab):
    """A running MPIJob (its launcher idle, its workers one per worker node) loses a worker node for good, the one
    the scheduler does not run on (losing the scheduler's is its failover: tests/k8s/test_scheduler_restart.py):
    reset.yml with kubernetes_reset_lost_hosts deletes the node's pods and the Node through cp-01, never reaching it;
    railforge restarts the gang whole, and with one worker node left its two workers cannot run: none stays bound
    beside a waiting one."""
    job = idle_job("lost")
    job["spec"]["runPolicy"]["backoffLimit"] = 6  # room for railforge's restart (its launcher's Job counts it)
    placed = functools.partial(job_pods, "lost")
    with submitted(job):
        running = polled(placed, lambda pods: len(pods) == 3 and all(pods.values()), 180)
        assert set(WORKERS) <= set(running.values()), running
        scheduler = "app.kubernetes.io/name=railforge-scheduler"
        on = kubectl(
            "get", "pods", "-n", "railforge-system", "-l", scheduler, "-o", "jsonpath={.items[*].spec.nodeName}"
        )
        (lost_worker,) = set(WORKERS) - set(on.split())
        run("podman", "kill", lost_worker)
        lost = {"kubernetes_reset_lost_hosts": [lost_worker]}
        result = run("ansible-playbook", "-i", INVENTORY, "-e", json.dumps(lost), "playbooks/reset.yml")
        counts = recap(result.stdout)
        assert counts[lost_worker]["unreachable"] == 0 and counts[lost_worker]["changed"] >= 2, result.stdout
        assert f"node/{lost_worker}" not in kubectl("get", "nodes", "-o", "name").split()
        # whole again: none of its pods bound (waiting, or ended with the job), never two running without the third
        settled = polled(placed, lambda pods: not any(pods.values()), 180)
        assert not any(settled.values()), settled
        proxy = "/api/v1/namespaces/railforge-system/services/railforge-scheduler:http/proxy/api/state"
        recent = json.loads(kubectl("get", "--raw", proxy))["recent"]
        ours = [d for d in recent if d["gang"] == "railforge-lab/lost" and d["kind"] in ("restart", "release")]
        assert ours, recent


def test_down_leaves_nothing_behind(lab):
    run("scripts/lab.sh", "down")
    for listing in (("ps", "-a", "{{.Names}}"), ("volume", "ls", "{{.Name}}"), ("network", "ls", "{{.Name}}")):
        # nothing labelled as the lab's: its nodes, their volumes, its network
        *command, field = listing
        assert run("podman", *command, "--filter", "label=io.railforge.lab", "--format", field).stdout == ""
    assert not set(HOSTS) & set(run("podman", "ps", "-a", "--format", "{{.Names}}").stdout.split())
    assert addresses(LAB_CIDR) == []  # its bridge went with it
    assert sysctls() == lab["sysctls"]
    assert not STATE.exists() and not (ROOT / "inventories/lab/artifacts").exists()
