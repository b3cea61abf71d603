"""Air-gapped through a mirror registry: the kubernetes role's containerd configuration (kubernetes_registry_mirrors,
kubernetes_image_repository), applied by ansible-playbook to a node container, makes containerd pull the cluster's
images from a registry of our own build (distribution, pinned in roles/versions), named by their upstream names.

The node sits on a Podman network of its own with its default route removed and a resolver that answers nothing
(127.0.0.1): it reaches the registry, which listens on the network's gateway address (a host bridge address only that
network reaches), and no other host. So a pull that succeeds came from the mirror, and the registry's access log shows
it; an image the mirror lacks fails, naming the image, with no other source to fall back on.
"""

import json
import re
import urllib.request
import uuid
from pathlib import Path

import pytest
from conftest import podman, run_playbook, systemd_node

from railforge.testbed.aptrepo import build_repo
from railforge.testbed.bridges import remove_stale_bridges
from railforge.testbed.build import binary, images_dir, pinned_versions
from railforge.testbed.procs import Process, free_port, wait_for

SUBNET_PREFIX = "10.89.73"  # the lab uses 10.89.50-51, Podman's default network 10.88
PAUSE = pinned_versions()["versions_pause_image"]  # registry.k8s.io/pause:TAG, as kubelet and kubeadm name it
UPSTREAM, PAUSE_PATH = PAUSE.split("/", 1)
# kubernetes_image_repository's path on the mirror: kubeadm's images and the sandbox image under the mirror's own name
MIRROR_PROJECT = "kubernetes"
MISSING = f"{UPSTREAM}/railforge-absent:1.0"  # pushed nowhere
REPOSITORY_MOUNT = "/srv/railforge-apt"
CRICTL = ["crictl", "--runtime-endpoint=unix:///run/containerd/containerd.sock"]
# The node's own OS archive, which the role's signed-source task assumes (it needs gpg): the image's Debian sources
# moved away, gnupg installed from the mounted repository through a one-off trusted source.
OS_MIRROR_APT = "-q -o Dir::Etc::SourceList=/tmp/os-mirror.list -o Dir::Etc::SourceParts=/dev/null"
STAND_IN_OS_MIRROR = (
    "set -e; mkdir -p /root/apt-off; mv /etc/apt/sources.list /etc/apt/sources.list.d/* /root/apt-off/ 2>/dev/null "
    f"|| true; echo 'deb [trusted=yes] file:{REPOSITORY_MOUNT}/ /' > /tmp/os-mirror.list; "
    f"apt-get {OS_MIRROR_APT} update; DEBIAN_FRONTEND=noninteractive apt-get {OS_MIRROR_APT} install -y "
    "--no-install-recommends gnupg; rm /tmp/os-mirror.list"
)


@pytest.fixture(scope="module")
def network():
    name = f"railforge-mirror-{uuid.uuid4().hex[:8]}"
    remove_stale_bridges(f"{SUBNET_PREFIX}.0/24")  # a killed run's
    created = podman("network", "create", "--disable-dns", f"--subnet={SUBNET_PREFIX}.0/24", name)
    assert created.returncode == 0, created.stderr
    yield name
    podman("network", "rm", "--force", name)


@pytest.fixture(scope="module")
def node(network):
    """A node container on that network (its address in .address), the lab's apt repository mounted."""
    options = (f"--network={network}", "--dns=127.0.0.1", f"--volume={build_repo()}:{REPOSITORY_MOUNT}:ro")
    with systemd_node(f"railforge-mirror-node-{uuid.uuid4().hex[:8]}", *options) as name:
        offline = podman("exec", name, "ip", "route", "del", "default")
        assert offline.returncode == 0, offline.stderr
        prepared = podman("exec", name, "sh", "-c", STAND_IN_OS_MIRROR)
        assert prepared.returncode == 0, prepared.stdout + prepared.stderr
        inspected = json.loads(podman("inspect", name).stdout)[0]
        yield name, inspected["NetworkSettings"]["Networks"][network]["IPAddress"]


class Mirror:
    def __init__(self, address: str, process: Process, digest: str):
        self.address, self.process, self.digest = address, process, digest

    def requests(self, client: str) -> list[str]:
        """The access log's "METHOD PATH" STATUS of each request from client."""
        pattern = rf'^{re.escape(client)} - - \[[^]]*\] "(\S+ \S+) HTTP/[0-9.]+" ([0-9]+) '
        return [f"{m[1]} {m[2]}" for m in re.finditer(pattern, self.process.log.read_text(), re.MULTILINE)]


def push(store: Path, archive: Path, ref: str, target: str) -> str:
    """The image `ref` of a docker archive, pushed to `target` through a throw-away Podman store; its digest."""
    podman_store = [f"--root={store}/root", f"--runroot={store}/run", "--storage-driver=vfs"]
    loaded = podman(*podman_store, "load", f"--input={archive}")
    assert loaded.returncode == 0, loaded.stderr
    digest_file = store / "digest"
    pushed = podman(
        *podman_store, "push", "--tls-verify=false", f"--digestfile={digest_file}", ref, f"docker://{target}"
    )
    assert pushed.returncode == 0, pushed.stderr
    return digest_file.read_text().strip()


@pytest.fixture(scope="module")
def mirror(node, tmp_path_factory):
    """The registry on the network's gateway address with a fresh storage directory, holding the sandbox image under
    its upstream path and under MIRROR_PROJECT/."""
    directory = tmp_path_factory.mktemp("mirror")
    address = f"{SUBNET_PREFIX}.1:{free_port()}"
    config = {
        "version": 0.1,
        "log": {"level": "info", "formatter": "text"},
        "storage": {"filesystem": {"rootdirectory": str(directory / "storage")}},
        "http": {"addr": address},
    }
    (directory / "config.yml").write_text(json.dumps(config))
    process = Process("registry", [binary("registry"), "serve", str(directory / "config.yml")], directory / "log")
    try:
        wait_for(
            "the mirror registry", lambda: urllib.request.urlopen(f"http://{address}/v2/").status == 200, 30, [process]
        )
        archive = images_dir() / "pause.tar"
        digest = push(directory / "podman", archive, PAUSE, f"{address}/{PAUSE_PATH}")
        assert push(directory / "podman", archive, PAUSE, f"{address}/{MIRROR_PROJECT}/{PAUSE_PATH}") == digest
        yield Mirror(address, process, digest)
    finally:
        process.stop()


def configure(node, mirror, tmp_path: Path) -> str:
    """The kubernetes role's package and containerd tasks on the node, containerd told to pull registry.k8s.io's
    images and the mirror's own through the mirror (plain HTTP); the play's output."""
    name, _ = node
    inventory = tmp_path / "inventory.yml"
    host = {"ansible_connection": "containers.podman.podman", "ansible_python_interpreter": "/usr/bin/python3"}
    inventory.write_text(json.dumps({"all": {"hosts": {name: host}}}))
    playbook = tmp_path / "containerd.yml"
    tasks = [
        {
            "name": f"The kubernetes role's {part}",
            "ansible.builtin.include_role": {"name": "kubernetes", "tasks_from": f"{part}.yml"},
        }
        for part in ("packages", "containerd")
    ]
    playbook.write_text(json.dumps([{"name": "Containerd through a mirror", "hosts": name, "tasks": tasks}]))
    url = f"http://{mirror.address}"
    variables = {
        "kubernetes_apt_repo_url": f"file:{REPOSITORY_MOUNT}/",
        "kubernetes_apt_repo_key_url": f"file://{REPOSITORY_MOUNT}/key.asc",
        "kubernetes_apt_repo_key_fingerprint": (build_repo() / "fingerprint.txt").read_text().strip(),
        "kubernetes_containerd_apt_repo_url": "",
        "kubernetes_containerd_restrict_oom_score_adj": True,
        "kubernetes_registry_mirrors": {UPSTREAM: [url], mirror.address: [url]},
        "kubernetes_image_repository": f"{mirror.address}/{MIRROR_PROJECT}",
    }
    result = run_playbook(str(playbook), variables, tmp_path, inventory=inventory)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return output


def node_changes(output: str, name: str) -> int:
    return int(re.search(rf"^{re.escape(name)}\s*:.*\bchanged=([0-9]+)", output, re.MULTILINE)[1])


@pytest.fixture(scope="module")
def configured(node, mirror, tmp_path_factory):
    output = configure(node, mirror, tmp_path_factory.mktemp("play"))
    assert node_changes(output, node[0]) > 0
    return node


def run_on(node, *command: str):
    return podman("exec", node[0], *command)


def pull(node, ref: str):
    return run_on(node, *CRICTL, "pull", ref)


def test_role_writes_one_hosts_file_per_mirrored_registry(configured, mirror):
    hosts = run_on(configured, "cat", f"/etc/containerd/certs.d/{UPSTREAM}/hosts.toml").stdout
    assert f'server = "https://{UPSTREAM}"' in hosts
    assert f'[host."http://{mirror.address}"]\n  capabilities = ["pull", "resolve"]' in hosts
    own = run_on(configured, "cat", f"/etc/containerd/certs.d/{mirror.address}/hosts.toml").stdout
    assert f'server = "https://{mirror.address}"' in own and f'[host."http://{mirror.address}"]' in own


def test_node_pulls_an_upstream_image_name_from_the_mirror(configured, mirror):
    pulled = pull(configured, PAUSE)
    assert pulled.returncode == 0, pulled.stderr
    status = json.loads(run_on(configured, *CRICTL, "inspecti", "--output=json", PAUSE).stdout)["status"]
    assert f"{UPSTREAM}/{PAUSE_PATH.split(':')[0]}@{mirror.digest}" in status["repoDigests"]
    assert PAUSE in status["repoTags"]
    # containerd resolves the tag, then fetches by digest, telling the mirror which registry it stands in for (ns=)
    name, tag = PAUSE_PATH.split(":")
    requests = mirror.requests(configured[1])
    assert f"HEAD /v2/{name}/manifests/{tag}?ns={UPSTREAM} 200" in requests
    assert f"GET /v2/{name}/manifests/{mirror.digest}?ns={UPSTREAM} 200" in requests


def test_sandbox_image_is_named_and_pulled_under_the_mirrors_own_name(configured, mirror):
    """kubernetes_image_repository: the image the role pins as containerd's sandbox (kubeadm's images follow the same
    repository) names the mirror, and the node pulls it from there."""
    config = run_on(configured, "cat", "/etc/containerd/config.toml").stdout
    sandbox = f"{mirror.address}/{MIRROR_PROJECT}/{PAUSE_PATH}"
    assert f'sandbox = "{sandbox}"' in config
    pulled = pull(configured, sandbox)
    assert pulled.returncode == 0, pulled.stderr
    name, tag = PAUSE_PATH.split(":")
    assert f"HEAD /v2/{MIRROR_PROJECT}/{name}/manifests/{tag} 200" in mirror.requests(configured[1])


def test_image_the_mirror_lacks_fails_naming_it(configured, mirror):
    failed = pull(configured, MISSING)
    assert failed.returncode != 0
    assert "code = NotFound" in failed.stderr, failed.stderr
    assert f"failed to resolve image: {MISSING}: not found" in failed.stderr, failed.stderr
    name, tag = MISSING.removeprefix(f"{UPSTREAM}/").split(":")
    assert f"HEAD /v2/{name}/manifests/{tag}?ns={UPSTREAM} 404" in mirror.requests(configured[1])


def test_second_run_changes_nothing(configured, mirror, tmp_path):
    assert node_changes(configure(configured, mirror, tmp_path), configured[0]) == 0
