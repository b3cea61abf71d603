"""Fixtures of the real-Kubernetes test bed: one control plane on loopback for the session, a real node on this
host per module that asks for it (one node at a time: the device-plugin path and the kubelet's sysctls are the
host's), the real mpi-operator out of cluster, and the railforge scheduler's CRDs and helpers.

Each is stopped (its own processes, files, mounts, bridge, cgroups and sysctls) when its scope ends, also after a
failure or an interrupt; if pytest is killed, the control plane, containerd and the kubelet die with it
(containerd's shims and pods do not: docs/testing.md).
"""

import calendar
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from railforge.k8s import CRD_DIR
from railforge.testbed import pki
from railforge.testbed.aptrepo import CONTAINERS_CONF, node_image
from railforge.testbed.build import TEST_IMAGE, binary, component
from railforge.testbed.controlplane import ControlPlane, add_api_node, create_namespace
from railforge.testbed.node import KubeletNode
from railforge.testbed.procs import Process, wait_for

ROOT = Path(__file__).resolve().parents[2]
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
POOL_LABEL = "railforge.test/pool"


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="the test bed needs root (kubelet, containerd, cgroups)")
        for item in items:
            item.add_marker(skip)


# The test bed as the inventory every playbook run starts from (run_playbook): a cluster brought to Railforge
# (kubernetes_mode existing, its admin kubeconfig), whose GPU and RDMA nodes are API objects, so the tests' inventories
# hand-set their hardware facts (railforge_hw_source: inventory) and the pre-flight's node rules (RDMA HCAs and link
# layer, GDRCopy off) are met as a site's group_vars would meet them. Written by the control_plane fixture.
TESTBED_INVENTORY: list[Path] = []


def testbed_inventory(plane) -> dict:
    accelerated = {"railforge_hw_source": "inventory"}
    gpu = {**accelerated, "railforge_gpu_count": 8}  # the tests' GPU nodes are DGX H100s (k8s_helpers.dgx_h100_facts)
    rdma = {
        **accelerated,
        "railforge_rdma_hcas": ["mlx5_0"],
        "railforge_rdma_link_layer": "infiniband",
        "gpudirect_gdrcopy_enabled": False,
    }
    return {
        "all": {
            "vars": {
                "railforge_cluster_name": "testbed",
                "kubernetes_mode": "existing",
                "kubernetes_kubeconfig": str(plane.admin_kubeconfig),
                "rail_networks_cidrs": ["10.200.0.0/16"],  # the one rail of railforge_rdma_hcas
            },
            "children": {
                "k8s_cluster": {"children": {"kube_control_plane": {}, "kube_node": {}}},
                "kube_node": {"children": {"gpu_nodes": {"vars": gpu}, "rdma_nodes": {"vars": rdma}}},
            },
        }
    }


@pytest.fixture(scope="session")
def control_plane():
    plane = ControlPlane.start()
    inventory = plane.admin_kubeconfig.parent / "testbed-inventory.json"
    inventory.write_text(json.dumps(testbed_inventory(plane)))
    TESTBED_INVENTORY[:] = [inventory]
    yield plane
    TESTBED_INVENTORY.clear()
    plane.stop()


@pytest.fixture(scope="module")
def node(control_plane):
    real_node = KubeletNode.start(control_plane)
    yield real_node
    real_node.stop()


def kubectl(plane, *args: str) -> str:
    result = subprocess.run(
        [binary("kubectl"), f"--kubeconfig={plane.admin_kubeconfig}", *args], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def apply_crds(plane, *paths) -> None:
    """Server-side apply CRDs and wait until they are served."""
    kubectl(plane, "apply", "--server-side", *(f"--filename={path}" for path in paths))
    extensions = client.ApiextensionsV1Api(plane.api)
    names = [yaml.safe_load(Path(path).read_text())["metadata"]["name"] for path in paths]

    def established() -> bool:
        for name in names:
            conditions = extensions.read_custom_resource_definition(name).status.conditions or []
            if not any(c.type == "Established" and c.status == "True" for c in conditions):
                return False
        return True

    wait_for("the CRDs to be established", established, 60)


@pytest.fixture(scope="session")
def nad_crd(control_plane, tmp_path_factory):
    """The NetworkAttachmentDefinition CRD of the pinned Multus release (from its Go module's DaemonSet manifest)."""
    manifest = component("multus").out_dir / "multus-daemonset.yml"
    crd = next(d for d in yaml.safe_load_all(manifest.read_text()) if d and d["kind"] == "CustomResourceDefinition")
    crd_file = tmp_path_factory.mktemp("multus") / "nad-crd.yaml"
    crd_file.write_text(yaml.safe_dump(crd))
    apply_crds(control_plane, crd_file)


def mpi_release():
    return component("mpi-operator").out_dir


@pytest.fixture(scope="session")
def scheduler_crds(control_plane):
    """The PodGroup CRD of the pinned mpi-operator release and our Queue CRD."""
    apply_crds(
        control_plane, mpi_release() / "scheduling.x-k8s.io_podgroups.yaml", CRD_DIR / "queues.railforge.io.yaml"
    )


@pytest.fixture(scope="module")
def mpi_operator(control_plane, scheduler_crds):
    """The real Kubeflow MPI operator, out of cluster, gang scheduling with the scheduler named ``railforge``."""
    release = mpi_release()
    apply_crds(control_plane, release / "kubeflow.org_mpijobs.yaml")
    # Least privilege: the operator runs as its own user, bound to the release's ClusterRole only.
    kubectl(control_plane, "apply", "--server-side", f"--filename={release / 'cluster-role.yaml'}")
    rbac = client.RbacAuthorizationV1Api(control_plane.api)
    if not rbac.list_cluster_role_binding(field_selector="metadata.name=mpi-operator").items:
        kubectl(
            control_plane,
            "create",
            "clusterrolebinding",
            "mpi-operator",
            "--clusterrole=mpi-operator",
            "--user=mpi-operator",
        )
    if not client.CoreV1Api(control_plane.api).list_namespace(field_selector="metadata.name=mpi-operator").items:
        create_namespace(control_plane, "mpi-operator")  # its leader-election Lease lives there
    cert, key = control_plane.ca.issue("mpi-operator", "mpi-operator")
    config = pki.kubeconfig(
        control_plane.directory / "mpi-operator.conf",
        control_plane.server,
        control_plane.ca.cert_path,
        cert,
        key,
        "mpi-operator",
    )
    operator = Process(
        "mpi-operator",
        [
            binary("mpi-operator"),
            f"--kubeConfig={config}",
            "--gang-scheduling=railforge",
            "--lock-namespace=mpi-operator",
            "--monitoring-port=0",
        ],
        control_plane.directory / "mpi-operator.log",
    )
    try:
        leases = client.CoordinationV1Api(control_plane.api)
        wait_for("the mpi-operator to lead", lambda: leases.list_namespaced_lease("mpi-operator").items, 60, [operator])
        yield operator
    finally:
        operator.stop()


class Cluster:
    """Helpers over the shared control plane for one test: its own node pool, namespace and scheduler name, so
    tests sharing the plane never see each other's nodes or pods."""

    def __init__(self, plane, name: str):
        self.plane = plane
        self.name = name
        self.core = client.CoreV1Api(plane.api)
        self.custom = client.CustomObjectsApi(plane.api)
        create_namespace(plane, name)

    def add_nodes(self, count: int, gpus: int = 8, labels: dict | None = None, prefix: str = "") -> list[str]:
        names = [f"{self.name}-{prefix}n{i:03d}" for i in range(count)]
        for node in names:
            allocatable = {"nvidia.com/gpu": str(gpus), "cpu": "64", "memory": "512Gi"}
            add_api_node(self.plane, node, allocatable, labels={POOL_LABEL: self.name, **(labels or {})})
        return names

    def settings(self, **overrides) -> dict:
        """Scheduler settings for this test: its pool, its name, fast loops, no election, no grace."""
        return {
            "scheduler_name": self.name,
            "node_selector": f"{POOL_LABEL}={self.name}",
            "min_period_seconds": 0.05,
            "resync_seconds": 2,
            "eviction_grace_seconds": 0,
            "leader_election": {"enabled": False},
            **overrides,
        }

    def pod(self, name: str, gpus: int = 8, group: str | None = None, labels=None, annotations=None, **spec) -> dict:
        pod_labels = {**({GROUP_LABEL: group} if group else {}), **(labels or {})}
        body = {
            "metadata": {"name": name, "labels": pod_labels, "annotations": annotations or {}},
            "spec": {
                "schedulerName": self.name,
                "containers": [
                    {
                        "name": "main",
                        "image": TEST_IMAGE,
                        "resources": {
                            "requests": {"nvidia.com/gpu": str(gpus), "cpu": "1"},
                            "limits": {"nvidia.com/gpu": str(gpus)},
                        },
                    }
                ],
                **spec,
            },
        }
        return self.core.create_namespaced_pod(self.name, body).to_dict()

    def podgroup(self, name: str, min_member: int, labels=None, annotations=None, **spec) -> dict:
        body = {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "spec": {"minMember": min_member, **spec},
        }
        return self.custom.create_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", self.name, "podgroups", body
        )

    def gang(self, name: str, pods: int, gpus: int = 8, labels=None, annotations=None, **group_spec) -> list[str]:
        self.podgroup(name, pods, labels=labels, annotations=annotations, **group_spec)
        names = [f"{name}-{i}" for i in range(pods)]
        for pod in names:
            self.pod(pod, gpus, group=name)
        return names

    def queue(self, name: str, **spec) -> dict:
        body = {"apiVersion": "railforge.io/v1alpha1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}
        return self.custom.create_cluster_custom_object("railforge.io", "v1alpha1", "queues", body)

    def pods(self, group: str | None = None) -> list:
        selector = f"{GROUP_LABEL}={group}" if group else None
        return self.core.list_namespaced_pod(self.name, label_selector=selector).items

    def bound(self, group: str | None = None) -> dict[str, str]:
        return {p.metadata.name: p.spec.node_name for p in self.pods(group) if p.spec.node_name}

    def group_object(self, name: str) -> dict:
        return self.custom.get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", self.name, "podgroups", name)

    def events(self, name: str) -> list[str]:
        """The reasons and messages of the Events about object ``name`` in this namespace."""
        items = self.core.list_namespaced_event(self.name, field_selector=f"involvedObject.name={name}").items
        return [f"{e.reason}: {e.message}" for e in items]

    def wait(self, what: str, ready, timeout: float = 30, watched=()) -> float:
        return wait_for(what, ready, timeout, list(watched))


@pytest.fixture
def cluster(control_plane, scheduler_crds, request):
    name = request.node.name.removeprefix("test_").replace("_", "-")[:40].rstrip("-")
    return Cluster(control_plane, name)


@pytest.fixture
def run_scheduler(control_plane):
    """Start the adapter in this process with settings (a mapping); stopped at the end of the test."""
    from railforge.k8s.adapter import Adapter
    from railforge.k8s.settings import settings_from_mapping

    started = []

    def start(settings: dict, identity: str | None = None) -> Adapter:
        api = control_plane.client()
        adapter = Adapter(api, settings_from_mapping(settings), identity=identity).start()
        started.append((adapter, api))
        return adapter

    yield start
    for adapter, api in started:
        adapter.stop()
        api.close()


def scheduler_process(plane, settings: dict, name: str) -> Process:
    """The adapter as its own process, through the CLI (SIGKILL tests, replicas); its dashboard on a free port, so
    replicas on one host do not collide."""
    config = plane.directory / f"{name}.yaml"
    config.write_text(json.dumps(settings))
    return Process(
        name,
        [
            "railforge",
            "scheduler",
            "run",
            f"--kubeconfig={plane.admin_kubeconfig}",
            f"--config={config}",
            f"--identity={name}",
            "--http-address=127.0.0.1:0",
        ],
        plane.directory / f"{name}.log",
    )


def borrowers_bound(cluster, run_scheduler):
    """Two 8-GPU nodes filled by two gangs of a borrowing queue beside an owner queue entitled to 8 GPUs, reclaim
    allowed at once: the (owner queue, adapter) a reclaim test starts from."""
    cluster.add_nodes(2, gpus=8)
    owner, borrower = f"{cluster.name}-owner", f"{cluster.name}-borrower"
    cluster.queue(owner, resources={"nvidia.com/gpu": {"quota": 8}})
    cluster.queue(borrower)
    adapter = run_scheduler(cluster.settings(policy={"min_runtime_before_reclaim": 0, "reclaim_cost_limit": None}))
    for name in ("b0", "b1"):
        cluster.gang(name, 2, gpus=4, labels={"railforge.io/queue": borrower})
    cluster.wait("the borrowers bound", lambda: len(cluster.bound()) == 4)
    return owner, adapter


def reserved_in(reason: str) -> float:
    """Seconds from now to the start a "reserved to start at <UTC time>" reason names."""
    match = re.match(r"reserved to start at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)", reason)
    assert match, reason
    return calendar.timegm(time.strptime(match.group(1), "%Y-%m-%dT%H:%M:%SZ")) - time.time()


def eventually(check, timeout: float = 20):
    """Poll check() until it returns without AssertionError or KeyError (a field not written yet); re-raise the last
    one after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except (AssertionError, KeyError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def can_i(plane, account: str, verb: str, resource: str, namespace: str = "default") -> bool:
    """kubectl auth can-i as ``account`` (a user or system:serviceaccount:NS:NAME); ``resource`` is TYPE,
    TYPE/NAME or TYPE:SUBRESOURCE."""
    resource, _, subresource = resource.partition(":")
    command = [binary("kubectl"), f"--kubeconfig={plane.admin_kubeconfig}", "auth", "can-i", verb, resource]
    command += [f"--subresource={subresource}"] if subresource else []
    result = subprocess.run([*command, f"--as={account}", f"--namespace={namespace}"], capture_output=True, text=True)
    return result.stdout.strip() == "yes"


def run_playbook(playbook: str, variables: dict, tmp_path: Path, *args: str, inventory: Path | None = None):
    """ansible-playbook PLAYBOOK on localhost, the test bed's inventory (TESTBED_INVENTORY) and ``inventory`` (whose
    values win) with ``variables`` as extra vars, from the repository root with its ansible.cfg."""
    extra = tmp_path / "vars.json"
    extra.write_text(json.dumps(variables))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    env["ANSIBLE_SSH_ARGS"] = "-o ProxyCommand=false"  # nothing here uses SSH; if anything tried, it fails locally
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,"]
    for source in [*TESTBED_INVENTORY, *([inventory] if inventory else [])]:
        command += ["-i", str(source)]
    command += [playbook, f"--extra-vars=@{extra}", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env)


def changed(result: subprocess.CompletedProcess) -> set[str]:
    """The objects a successful run changed (or, in check mode, would change), as 'Kind name'."""
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return set(re.findall(r"^changed: \[localhost\] => \(item=(.*)\)$", output, re.MULTILINE))


def podman(*args: str) -> subprocess.CompletedProcess:
    """podman with the runtime and ulimits this host allows (molecule/containers.conf)."""
    return subprocess.run(
        ["podman", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)},
    )


@contextlib.contextmanager
def systemd_node(name: str, *options: str):
    """A container of the node image run as the lab runs its nodes (privileged, its own cgroup namespace, systemd as
    PID 1, containerd's data off the overlay root), with further podman run ``options``; removed on exit."""
    boot = (
        "rm -f /etc/machine-id /var/lib/dbus/machine-id; systemd-machine-id-setup >/dev/null; exec /lib/systemd/systemd"
    )
    started = podman(
        "run", "--detach", f"--name={name}", "--privileged", "--cgroupns=private", "--systemd=false",
        "--stop-signal=SIGRTMIN+3", "--tmpfs=/tmp", "--tmpfs=/run", "--tmpfs=/run/lock", "--env=container=podman",
        "--tmpfs=/var/lib/containerd", *options, node_image(), "sh", "-c", boot,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:

        def booted() -> bool:
            return podman("exec", name, "systemctl", "is-system-running").stdout.strip() in ("running", "degraded")

        wait_for("the node's systemd", booted, 60)
        yield name
    finally:
        podman("rm", "--force", "--time=2", name)
