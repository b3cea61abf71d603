"""The lab's apt repository (railforge testbed apt-repo): our packages carry upstream's names, versions, paths and
dependencies and the test bed's binaries, and a node of the test image with no network and no other source installs
them from it, signature checked; a tampered Release is refused."""

import hashlib
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from conftest import podman, systemd_node

from railforge.testbed.aptrepo import build_repo, node_image
from railforge.testbed.build import CNI_PLUGINS, binary, pinned_versions
from railforge.testbed.procs import wait_for

PINS = pinned_versions()
KUBERNETES = f"{PINS['versions_kubernetes']}-{PINS['versions_kubernetes_package_revision']}"
CRI_TOOLS = f"{PINS['versions_crictl']}-{PINS['versions_kubernetes_package_revision']}"
UNITS = "./usr/lib/systemd/system"
EXPECTED = {
    "kubelet": (
        KUBERNETES,
        {"./usr/bin/kubelet", f"{UNITS}/kubelet.service", "./etc/default/kubelet"},
        f"kubernetes-cni (>= {PINS['versions_cni_plugins']}), mount, util-linux",
    ),
    "kubernetes-cni": (
        f"{PINS['versions_cni_plugins']}-{PINS['versions_cni_plugins_package_revision']}",
        {f"./opt/cni/bin/{name}" for _, name in CNI_PLUGINS},
        None,
    ),
    "kubeadm": (KUBERNETES, {"./usr/bin/kubeadm", f"{UNITS}/kubelet.service.d/10-kubeadm.conf"}, None),
    "kubectl": (KUBERNETES, {"./usr/bin/kubectl"}, None),
    "cri-tools": (
        f"{PINS['versions_crictl']}-{PINS['versions_kubernetes_package_revision']}",
        {"./usr/bin/crictl"},
        None,
    ),
    "containerd.io": (
        f"{PINS['versions_containerd']}-{PINS['versions_containerd_package_revision']}",
        {
            "./usr/bin/containerd",
            "./usr/bin/containerd-shim-runc-v2",
            "./usr/bin/ctr",
            "./usr/bin/runc",
            f"{UNITS}/containerd.service",
            "./etc/containerd/config.toml",
        },
        "libc6 (>= 2.34), libseccomp2 (>= 2.5.0)",
    ),
}
MOUNT = "/srv/railforge-lab"


@pytest.fixture(scope="module")
def repo():
    return build_repo()


def deb(repo, name):
    return repo / f"{name}_{EXPECTED[name][0]}_amd64.deb"


def dpkg_deb(*args) -> str:
    return subprocess.run(["dpkg-deb", *map(str, args)], check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_package_has_upstreams_name_version_files_and_dependencies(repo, name):
    version, files, depends = EXPECTED[name]
    fields = dict(line.split(": ", 1) for line in dpkg_deb("-f", deb(repo, name)).splitlines() if ": " in line)
    assert (fields["Package"], fields["Version"], fields["Architecture"]) == (name, version, "amd64")
    assert fields["Maintainer"].startswith("Railforge ")
    assert fields.get("Depends") == depends
    listed = {line.split()[-1] for line in dpkg_deb("--contents", deb(repo, name)).splitlines()}
    regular = {path for path in listed if not path.endswith("/")}
    assert regular == files


def test_kubelet_recommends_iptables_and_keeps_its_state_directories(repo):
    assert dpkg_deb("-f", deb(repo, "kubelet"), "Recommends").strip() == "iptables (>= 1.8.4)"
    listed = dpkg_deb("--contents", deb(repo, "kubelet"))
    assert "./var/lib/kubelet/\n" in listed and "./etc/kubernetes/manifests/\n" in listed


def test_containerd_io_replaces_debians_containerd_and_runc_and_keeps_its_config(repo):
    fields = dpkg_deb("-f", deb(repo, "containerd.io"), "Provides", "Conflicts", "Replaces")
    assert fields.count("containerd, runc") == 3
    info = dpkg_deb("--info", deb(repo, "containerd.io"))
    assert "conffiles" in info and "postinst" in info
    conffiles = subprocess.run(
        ["dpkg-deb", "--ctrl-tarfile", deb(repo, "containerd.io")], check=True, capture_output=True
    ).stdout
    assert b"/etc/containerd/config.toml" in conffiles


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("kubeadm", "usr/bin/kubeadm"),
        ("kubelet", "usr/bin/kubelet"),
        ("containerd.io", "usr/bin/runc"),
        ("cri-tools", "usr/bin/crictl"),
        ("kubernetes-cni", "opt/cni/bin/bridge"),
    ],
)
def test_packaged_binary_is_the_test_beds_build(repo, name, path):
    tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb(repo, name)], check=True, capture_output=True).stdout
    packaged = subprocess.run(["tar", "-xO", f"./{path}"], input=tar, check=True, capture_output=True).stdout
    with open(binary(Path(path).name), "rb") as built:
        assert hashlib.sha256(packaged).hexdigest() == hashlib.sha256(built.read()).hexdigest()


def test_repository_is_indexed_and_signed_by_the_key_it_publishes(repo, tmp_path):
    fingerprint = (repo / "fingerprint.txt").read_text().strip()
    assert len(fingerprint) == 40
    index = (repo / "Packages").read_text()
    for name, (version, _, _) in EXPECTED.items():
        assert f"Package: {name}\nVersion: {version}\n" in index
    assert "Package: gnupg\n" in index and "Package: containernetworking-plugins\n" not in index
    keyring = tmp_path / "key.gpg"  # gpgv reads a binary keyring, not the armored key apt takes
    subprocess.run(["gpg", "--batch", "--dearmor", "-o", keyring, repo / "key.asc"], check=True)
    gpgv = ["gpgv", "--keyring", keyring, "--status-fd", "1"]
    detached = subprocess.run([*gpgv, repo / "Release.gpg", repo / "Release"], capture_output=True, text=True)
    clear = subprocess.run([*gpgv, repo / "InRelease"], capture_output=True, text=True)
    for result in (detached, clear):
        assert f"VALIDSIG {fingerprint}" in result.stdout, result.stderr


# Run first in a node: apt's only source is the mounted repository, trusted through its own key.
ONLY_OUR_SOURCE = (
    "set -e; mkdir -p /root/apt-off; mv /etc/apt/sources.list /etc/apt/sources.list.d/* /root/apt-off/ "
    f"2>/dev/null || true; echo 'deb [signed-by={MOUNT}/key.asc] file:{MOUNT}/ /' "
    "> /etc/apt/sources.list.d/railforge-lab.list; "
)
INSTALL = (
    "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "
    "kubelet kubeadm kubectl cri-tools containerd.io"
)


def run_in_node(repo, script: str) -> subprocess.CompletedProcess:
    """The script in a throw-away container of the node image: no network, the repository mounted read-only, every
    other apt source moved away."""
    name = f"--name=railforge-aptrepo-{uuid.uuid4().hex[:8]}"
    mount = f"--volume={repo}:{MOUNT}:ro"
    return podman("run", "--rm", name, "--network=none", mount, node_image(), "sh", "-c", ONLY_OUR_SOURCE + script)


def test_offline_node_installs_the_kubernetes_packages_from_the_signed_repository_alone(repo):
    result = run_in_node(
        repo,
        f"{INSTALL} conntrack socat ebtables ethtool iptables gnupg "
        "&& kubeadm version -o short && runc --version && containerd --version && /opt/cni/bin/bridge --version "
        "&& ls /etc/systemd/system/multi-user.target.wants/",
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert f"\nv{PINS['versions_kubernetes']}\n" in result.stdout
    assert f"runc version {PINS['versions_runc']}" in result.stdout
    assert f" v{PINS['versions_containerd']} " in result.stdout
    assert f"CNI bridge plugin v{PINS['versions_cni_plugins']}" in output  # kubelet pulled it in (--version: stderr)
    assert "kubelet.service" in result.stdout and "containerd.service" in result.stdout
    assert "signature" not in output.lower() and "unauthenticated" not in output.lower()


@pytest.mark.parametrize("signed_by", ["InRelease", "Release.gpg"])
def test_a_tampered_release_fails_the_signature_check(repo, tmp_path, signed_by):
    copy = tmp_path / "repo"
    copy.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    for name in ("Packages", "Packages.gz", "Release", "Release.gpg", "InRelease", "key.asc"):
        shutil.copy(repo / name, copy / name)
    for name in ("Release", "InRelease"):
        text = (copy / name).read_text()
        assert "Label: Railforge lab\n" in text
        (copy / name).write_text(text.replace("Label: Railforge lab\n", "Label: tampered\n"))
    if signed_by == "Release.gpg":
        (copy / "InRelease").unlink()
    result = run_in_node(copy, "apt-get update -q")
    output = result.stdout + result.stderr
    assert result.returncode == 100, output
    assert "The following signatures were invalid: BADSIG" in output, output
    checked = "InRelease" if signed_by == "InRelease" else "Release"
    assert f"E: The repository 'file:{MOUNT}  {checked}' is not signed." in output, output


@pytest.fixture
def apt_node(repo):
    """A node as the lab runs one, with no network and the repository mounted."""
    with systemd_node(
        f"railforge-aptrepo-{uuid.uuid4().hex[:8]}", "--network=none", f"--volume={repo}:{MOUNT}:ro"
    ) as name:
        yield name


def test_under_systemd_containerd_runs_and_kubelet_is_enabled_with_kubeadms_drop_in(apt_node):
    installed = podman("exec", apt_node, "sh", "-c", ONLY_OUR_SOURCE + INSTALL)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    def show(unit: str, prop: str) -> str:
        return podman("exec", apt_node, "systemctl", "show", unit, f"--property={prop}", "--value").stdout.strip()

    wait_for("containerd.service", lambda: show("containerd", "ActiveState") == "active", 30)
    version = podman("exec", apt_node, "ctr", "version").stdout
    assert f"Server:\n  Version:  v{PINS['versions_containerd']}" in version, version
    assert (show("containerd", "Delegate"), show("containerd", "KillMode")) == ("yes", "process")
    assert show("kubelet", "UnitFileState") == "enabled"
    assert show("kubelet", "DropInPaths") == "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"
    environment = show("kubelet", "Environment")
    assert "KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf" in environment
    assert "KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml" in environment
    assert show("kubelet", "EnvironmentFiles").split("\n")[0].startswith("/var/lib/kubelet/kubeadm-flags.env")
