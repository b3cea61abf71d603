"""The lab cluster's images (railforge.testbed.images): named exactly as our kubeadm names what it pulls, and each
loads and runs its pinned binary under its own entry point, in a throw-away Podman store (never the host's); on the
real test-bed node, containerd imports them under their names and the kubelet runs them as kubeadm's pods do."""

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from kubernetes import client

from railforge.testbed.build import binary, pinned_versions, previous_patch
from railforge.testbed.controlplane import create_namespace
from railforge.testbed.images import cluster_image_specs, cluster_images
from railforge.testbed.procs import wait_for

PINS = pinned_versions()
SPECS = {image.archive.removesuffix(".tar"): image for image in cluster_image_specs()}
KUBERNETES = f"Kubernetes v{PINS['versions_kubernetes']}"
# image -> (arguments after the entry point, what the output must contain)
VERSION_RUNS = {
    "kube-apiserver": (["kube-apiserver", "--version"], KUBERNETES),
    "kube-controller-manager": (["kube-controller-manager", "--version"], KUBERNETES),
    "kube-scheduler": (["kube-scheduler", "--version"], KUBERNETES),
    "kube-proxy": (["/usr/local/bin/kube-proxy", "--version"], KUBERNETES),  # kubeadm's DaemonSet runs this path
    "etcd": (["etcd", "--version"], f"etcd Version: {PINS['versions_etcd']}"),
    "coredns": (["-version"], f"CoreDNS-{PINS['versions_coredns']}"),
    "mpi-operator": (["--version"], f"Version: v{PINS['versions_mpi_operator']}"),
    "flannel": (["--version"], f"v{PINS['versions_flannel']}"),
}
# The stand-in of the patch release before the pin (the lab upgrades from it): its control plane's images.
PREVIOUS = previous_patch(PINS["versions_kubernetes"])
VERSION_RUNS |= {
    f"{name}-{PREVIOUS}": (args, f"Kubernetes v{PREVIOUS}")
    for name, (args, _) in VERSION_RUNS.items()
    if name.startswith("kube-") and PREVIOUS
}


class Store:
    """A Podman store of its own (vfs, runc through the repository's containers.conf), removed afterwards."""

    def __init__(self, directory: str):
        self.command = ["podman", f"--root={directory}/root", f"--runroot={directory}/run", "--storage-driver=vfs"]
        self.env = {**os.environ, "CONTAINERS_CONF": str(ROOT / "molecule/containers.conf")}

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run([*self.command, *args], capture_output=True, text=True, env=self.env, timeout=120)
        assert not check or result.returncode == 0, result.stdout + result.stderr
        return result

    def run(self, ref: str, *args: str, options: tuple[str, ...] = ("--network=none",)) -> str:
        result = self("run", "--rm", *options, ref, *args)
        return result.stdout + result.stderr


@pytest.fixture(scope="module")
def images() -> Path:
    return cluster_images()


@pytest.fixture(scope="module")
def store(images):
    # Podman refuses a runroot path of 50 characters or more: a short temporary directory.
    with tempfile.TemporaryDirectory(prefix="rf-podman-") as directory:
        podman = Store(directory)
        for archive in json.loads((images / "manifest.json").read_text()).values():
            podman("load", "--quiet", f"--input={images / archive}")
        yield podman
        # Its images only: `podman system reset` would also remove the host's shared state (/run/libpod), under
        # any other Podman containers running beside (Molecule's, a developer's). The directory goes with them.
        podman("rmi", "--all", "--force", check=False)


def test_the_manifest_names_what_our_kubeadm_pulls_and_the_add_ons(images, tmp_path):
    configuration = {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "ClusterConfiguration",
        "kubernetesVersion": f"v{PINS['versions_kubernetes']}",  # set: kubeadm then asks no server for a version
        "imageRepository": PINS["versions_kubernetes_registry"],
        "etcd": {"local": {"imageTag": PINS["versions_etcd_image_tag"]}},
    }
    listed = set()
    for version, build in ((PINS["versions_kubernetes"], "kubernetes"), (PREVIOUS, "kubernetes-previous-patch")):
        if not version:
            continue
        config = tmp_path / f"cluster-{version}.yaml"
        config.write_text(yaml.safe_dump({**configuration, "kubernetesVersion": f"v{version}"}))
        listed |= set(
            subprocess.run(
                [binary("kubeadm", build), "config", "images", "list", f"--config={config}"],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            ).stdout.split()
        )
    add_ons = [  # the references the kubernetes, mpi_operator and rail_networks roles' image defaults make of the pins
        f"{PINS['versions_flannel_registry']}/flannel:v{PINS['versions_flannel']}",
        f"{PINS['versions_mpi_operator_registry']}/mpi-operator:{PINS['versions_mpi_operator']}",
        f"{PINS['versions_multus_registry']}/multus-cni:v{PINS['versions_multus']}",
        f"{PINS['versions_whereabouts_registry']}/whereabouts:v{PINS['versions_whereabouts']}",
    ]
    manifest = json.loads((images / "manifest.json").read_text())
    assert sorted(manifest) == sorted([*listed, *add_ons])
    assert all((images / archive).stat().st_size > 0 for archive in manifest.values())


@pytest.mark.parametrize("name", sorted(VERSION_RUNS))
def test_each_image_runs_its_pinned_binary(store, name):
    args, expected = VERSION_RUNS[name]
    assert expected in store.run(SPECS[name].ref, *args)


def test_the_sandbox_image_says_what_it_is_and_exits_with_minus_v(store):
    """As upstream's pause: kubeadm's upgrade health check runs it with -v as a Job that must complete."""
    assert "pause" in store.run(PINS["versions_pause_image"], "-v")


def test_images_carry_upstreams_user_entry_point_and_path(store):
    for image in SPECS.values():
        config = json.loads(store("image", "inspect", "--format={{json .Config}}", image.ref).stdout)
        assert config["User"] == f"{image.user}:{image.user}", image.ref
        assert (config.get("Entrypoint") or []) == list(image.entrypoint), image.ref
        assert (config.get("Cmd") or []) == list(image.cmd), image.ref
        assert "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" in config["Env"], image.ref
    assert SPECS["coredns"].user == 65532  # distroless `nonroot`, as upstream's CoreDNS image runs


def debian_version(images: Path, package: str, ref: str = SPECS["kube-proxy"].ref) -> str:
    """The upstream version of a Debian package an image was built from (name_[epoch%3a]version-rev)."""
    debs = json.loads((images / "debian-packages.json").read_text())[ref]
    deb = next(deb for deb in debs if deb.startswith(f"{package}_"))
    return re.match(rf"{package}_(?:\d+%3a)?([^-+]+)", deb).group(1)


def test_kube_proxy_image_has_the_nft_iptables_and_conntrack_userland(store, images):
    ref = SPECS["kube-proxy"].ref
    iptables = debian_version(images, "iptables")
    for command in (
        "iptables",
        "iptables-save",
        "iptables-restore",
        "ip6tables",
        "ip6tables-save",
        "ip6tables-restore",
    ):
        assert f"{command} v{iptables} (nf_tables)" in store.run(ref, command, "--version")
    assert f"conntrack v{debian_version(images, 'conntrack')}" in store.run(ref, "conntrack", "--version")
    assert f"nftables v{debian_version(images, 'nftables')}" in store.run(ref, "nft", "--version")


def test_flannel_image_has_the_nft_iptables_userland_its_rules_go_through(store, images):
    """flanneld execs iptables for its masquerading and forwarding rules: the image holds the nft backend's."""
    iptables = debian_version(images, "iptables", SPECS["flannel"].ref)
    for command in ("iptables", "iptables-save", "iptables-restore"):
        assert f"{command} v{iptables} (nf_tables)" in store.run(
            SPECS["flannel"].ref, "--version", options=("--network=none", f"--entrypoint={command}")
        )


def test_kube_proxy_image_writes_and_reads_rules_in_a_pod_network_namespace(store):
    """As in a pod: the sandbox (our pause image) holds a network namespace of its own; kube-proxy's image, joined
    to it with NET_ADMIN, adds a chain through the nft backend and reads it back, and lists conntrack entries."""
    sandbox = store("run", "--detach", "--network=none", PINS["versions_pause_image"]).stdout.strip()
    try:
        joined = (f"--network=container:{sandbox}", "--cap-add=NET_ADMIN")
        ref = SPECS["kube-proxy"].ref
        store.run(ref, "iptables", "--table=nat", "--new-chain=RAILFORGE-TEST", options=joined)
        assert ":RAILFORGE-TEST - [0:0]" in store.run(ref, "iptables-save", "--table=nat", options=joined)
        assert "flow entries have been shown" in store.run(ref, "conntrack", "--dump", options=joined)
    finally:
        store("rm", "--force", "--time=0", sandbox)


@pytest.fixture(scope="module")
def node_with_images(node, images):
    for archive in json.loads((images / "manifest.json").read_text()).values():
        node.ctr("images", "import", "--all-platforms", str(images / archive))
    create_namespace(node.plane, "cluster-images")
    return node


def pod(name: str, node: str, ref: str, security: dict, **container) -> dict:
    """A pod of a cluster image bound straight to the node, with what kubeadm's manifests set."""
    main = {"name": "main", "image": ref, "imagePullPolicy": "Never", "securityContext": security, **container}
    spec = {"nodeName": node, "restartPolicy": "Never", "automountServiceAccountToken": False, "containers": [main]}
    return {"metadata": {"name": name}, "spec": spec}


def test_containerd_imports_every_archive_under_its_name(node_with_images, images):
    listed = set(node_with_images.ctr("images", "list", "--quiet").split())
    assert set(json.loads((images / "manifest.json").read_text())) <= listed


def test_the_kubelet_runs_etcd_by_name_as_kubeadms_static_pod_does(node_with_images):
    core = client.CoreV1Api(node_with_images.plane.api)
    body = pod("etcd-version", node_with_images.name, SPECS["etcd"].ref, {}, command=["etcd", "--version"])
    core.create_namespaced_pod("cluster-images", body)
    wait_for("the etcd pod to end", lambda: pod_phase(core, "etcd-version") in ("Succeeded", "Failed"), 60)
    assert pod_phase(core, "etcd-version") == "Succeeded"
    assert f"etcd Version: {PINS['versions_etcd']}" in core.read_namespaced_pod_log("etcd-version", "cluster-images")


def test_coredns_serves_port_53_as_nonroot_with_kubeadms_security_context(node_with_images):
    """No file capability on /coredns, no privilege escalation: containerd 2 opens the low ports to the pod."""
    core = client.CoreV1Api(node_with_images.plane.api)
    security = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    core.create_namespaced_pod("cluster-images", pod("coredns", node_with_images.name, SPECS["coredns"].ref, security))

    def serving() -> bool:
        return pod_phase(core, "coredns") != "Pending" and ".:53" in pod_log(core, "coredns")

    wait_for("CoreDNS to serve", serving, 60)
    assert pod_phase(core, "coredns") == "Running", pod_log(core, "coredns")
    status = core.read_namespaced_pod("coredns", "cluster-images").status.container_statuses[0]
    assert status.ready and status.restart_count == 0


def pod_phase(core, name: str) -> str:
    return core.read_namespaced_pod(name, "cluster-images").status.phase


def pod_log(core, name: str) -> str:
    try:
        return core.read_namespaced_pod_log(name, "cluster-images")
    except client.ApiException:  # the container has not started yet
        return ""
