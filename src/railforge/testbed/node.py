"""A real Kubernetes node on this host: containerd + runc + Debian's CNI plugins + a kubelet, joined to a
ControlPlane, running real pods from locally built images (no registry).

Host processes, not a Podman node container: both were measured to work (../shared/research/nested-containerd.md);
on the host there is no node image to build, no nesting of cgroups and mounts, and the kubelet reaches the
loopback-only control plane directly. The price is that the node touches the host, so start() records and stop()
undoes each change, in reverse:

- processes: containerd and kubelet (by their handles), then any containerd shim still serving our socket;
- mounts under the node's directory (pod volumes), then the directory itself;
- network: the CNI bridge (one per node, named after it; no gateway address, so pods have no route off it and the
  host forwards nothing of theirs), the host-local IP store (kept in the node's directory), and the iptables and
  ip6tables chains and rules the kubelet adds (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT);
- cgroups: the kubelet's cgroup root ``/railforge-<node>`` in every v1 hierarchy, removed bottom-up;
- sysctls the kubelet rewrites host-wide (vm.overcommit_memory, vm.panic_on_oom, kernel.panic, kernel.panic_on_oops,
  kernel.keys.root_maxkeys, kernel.keys.root_maxbytes): the values found at start are written back;
- host paths the components use whatever they are told: /var/lib/kubelet (the device-plugin API fixes it),
  /var/log/containers and /var/log/pods (the kubelet's log links), /run/containerd (the shims' runc state and
  sockets), /run/netns (pod network namespaces) and /var/lib/cni (libcni's result cache): each removed when
  start() created it.

One node per host at a time (the device-plugin path and the kubelet's host-wide settings are shared): start()
takes an exclusive lock (/run/railforge-testbed-node.lock) and stop() releases it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from railforge.testbed import pki
from railforge.testbed.build import TEST_IMAGE, binary, images_dir, pinned_versions
from railforge.testbed.controlplane import READY_TIMEOUT, ControlPlane
from railforge.testbed.deviceplugin import DEVICE_PLUGIN_DIR
from railforge.testbed.procs import Process, free_port, kill_matching, wait_for

CGROUP_ROOT = Path("/sys/fs/cgroup")
NODE_LOCK = Path("/run/railforge-testbed-node.lock")
# Host paths the components write whatever their configuration says (see the module docstring).
SHARED_HOST_PATHS = tuple(
    Path(p)
    for p in (
        "/var/lib/kubelet",
        "/var/log/containers",
        "/var/log/pods",
        "/run/containerd",
        "/run/netns",
        "/var/lib/cni",
    )
)
IPTABLES = ("iptables", "ip6tables")
IPTABLES_TABLES = ("filter", "nat", "mangle", "raw")
CNI_PLUGINS = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
POD_SUBNET = "10.244.0.0/24"
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)


def one_shot_pod(name: str, node: str, command: list[str], *, limits: dict | None = None, token: bool = False) -> dict:
    """A pod of the test image bound straight to `node` (no scheduler), running `command` once as nobody (uid
    65534, no capabilities); `token` mounts the service-account token (a tmpfs volume)."""
    container = {
        "name": "main",
        "image": TEST_IMAGE,
        "imagePullPolicy": "Never",  # no registry: the image was imported into containerd
        "command": command,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "resources": {"limits": limits or {}},
    }
    spec = {
        "nodeName": node,
        "restartPolicy": "Never",
        "automountServiceAccountToken": token,
        "containers": [container],
    }
    return {"metadata": {"name": name}, "spec": spec}


def node_ip() -> str:
    """The first global IPv4 address of this host (the kubelet refuses a loopback node IP)."""
    out = subprocess.run(["ip", "-j", "-4", "addr", "show", "scope", "global"], capture_output=True, check=True)
    for link in json.loads(out.stdout):
        for address in link.get("addr_info", []):
            return address["local"]
    raise RuntimeError("no global IPv4 address on this host: the kubelet needs a non-loopback node IP")


def cgroup_hierarchies() -> list[Path]:
    return sorted(p for p in CGROUP_ROOT.iterdir() if p.is_dir() and not p.is_symlink())


@dataclass
class KubeletNode:
    name: str
    plane: ControlPlane
    directory: Path
    bridge: str
    processes: list[Process] = field(default_factory=list)
    sysctls: dict[str, str] = field(default_factory=dict)
    created: list[Path] = field(default_factory=list)  # host directories that did not exist before start()
    firewall: set[tuple[str, str, str]] = field(default_factory=set)  # (command, table, rule) found at start
    lock: int | None = None
    ready_seconds: float = 0.0

    @property
    def cgroup_root(self) -> str:
        return f"/railforge-{self.name}"

    @property
    def containerd_socket(self) -> Path:
        return self.directory / "containerd.sock"

    @property
    def kubelet_dir(self) -> Path:
        """The kubelet's root directory (its plugins_registry, where DRA drivers' kubelet plugins register)."""
        return self.directory / "kubelet"

    @property
    def cdi_dir(self) -> Path:
        """Where containerd reads CDI specs (what DRA drivers' kubelet plugins write)."""
        return self.directory / "cdi"

    @classmethod
    def start(cls, plane: ControlPlane, name: str = "rf-node-0") -> KubeletNode:
        directory = Path(tempfile.mkdtemp(prefix="rf-node-"))
        node = cls(name, plane, directory, bridge=f"rfbr-{name[-6:]}"[:15])
        try:
            node._start()
        except BaseException:
            node.stop()
            raise
        return node

    def _start(self) -> None:
        started = time.monotonic()
        self._prepare_host()
        self._start_containerd()
        self._start_kubelet()
        wait_for(f"node {self.name} Ready", self._ready, READY_TIMEOUT, self.processes)
        self.ready_seconds = time.monotonic() - started

    def _prepare_host(self) -> None:
        self.lock = os.open(NODE_LOCK, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.lock)
            self.lock = None
            raise RuntimeError(
                f"another test-bed node runs on this host (it holds {NODE_LOCK}); stop it first"
            ) from None
        self.firewall = firewall_rules()
        for key in KUBELET_SYSCTLS:
            self.sysctls[key] = (Path("/proc/sys") / key).read_text().strip()
        for hierarchy in cgroup_hierarchies():
            if hierarchy.name == "unified":
                continue  # the empty v2 hierarchy: runc creates what it needs there itself
            path = hierarchy / self.cgroup_root.lstrip("/")
            path.mkdir(exist_ok=True)
            if hierarchy.name == "cpuset":  # a new cpuset starts empty; tasks cannot join it until it has CPUs
                for setting in ("cpuset.cpus", "cpuset.mems"):
                    (path / setting).write_text((hierarchy / setting).read_text())
        self.created = [path for path in SHARED_HOST_PATHS if not path.exists()]
        DEVICE_PLUGIN_DIR.mkdir(parents=True, exist_ok=True)

    def _start_containerd(self) -> None:
        d = self.directory
        (d / "cni/net.d").mkdir(parents=True)
        network = {
            "cniVersion": "1.0.0",
            "name": "railforge",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": False,  # no route off the bridge: pod traffic stays among this node's namespaces
                    "ipMasq": False,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET}]],
                        "dataDir": str(d / "cni/ipam"),
                    },
                }
            ],
        }
        (d / "cni/net.d/10-railforge.conflist").write_text(json.dumps(network, indent=2))
        config = f"""version = 3
root = "{d}/containerd/root"
state = "{d}/containerd/state"

[grpc]
  address = "{self.containerd_socket}"

[ttrpc]
  address = "{self.containerd_socket}.ttrpc"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{pinned_versions()["versions_pause_image"]}"

[plugins.'io.containerd.nri.v1.nri']
  disable = true  # no NRI plugins here; enabled, it would leave /run/nri behind

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true  # no CAP_SYS_RESOURCE on these hosts
  cdi_spec_dirs = ["{self.cdi_dir}"]  # the DRA driver stand-in's devices, in the node's directory
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = "{binary("runc")}"
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{CNI_PLUGINS}"]
    conf_dir = "{d}/cni/net.d"
"""
        (d / "containerd.toml").write_text(config)
        bin_dir = Path(binary("containerd")).parent
        env = {"PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin"}  # containerd finds its shim on PATH
        containerd = Process(
            "containerd", [binary("containerd"), "--config", str(d / "containerd.toml")], d / "containerd.log", env=env
        )
        self.processes.append(containerd)
        wait_for("containerd socket", self.containerd_socket.exists, READY_TIMEOUT, [containerd])
        for archive in ("pause.tar", "testpod.tar"):
            self.ctr("images", "import", "--all-platforms", str(images_dir() / archive))

    def ctr(self, *args: str) -> str:
        result = subprocess.run(
            [binary("ctr"), "--address", str(self.containerd_socket), "--namespace", "k8s.io", *args],
            capture_output=True,
            text=True,
        )
        if result.returncode:
            raise RuntimeError(f"ctr {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    def _start_kubelet(self) -> None:
        d, plane = self.directory, self.plane
        cert, key = plane.ca.issue(f"kubelet-{self.name}", f"system:node:{self.name}", "system:nodes")
        kubeconfig = pki.kubeconfig(d / "kubelet.conf", plane.server, plane.ca.cert_path, cert, key, self.name)
        ip = node_ip()
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,  # these hosts are cgroup v1; kubelet >= 1.35 refuses v1 without this
            "cgroupDriver": "cgroupfs",  # no systemd here
            "cgroupRoot": self.cgroup_root,
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "address": ip,
            "port": free_port(),
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port(),
            "readOnlyPort": 0,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(plane.ca.cert_path)},
            },
            "authorization": {"mode": "Webhook"},
            "failSwapOn": False,
            "imageGCHighThresholdPercent": 100,  # the preloaded images cannot be pulled again
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {"nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%"},
            "podLogsDir": str(d / "pod-logs"),
            "resolvConf": "",
            "registerNode": True,
        }
        (d / "kubelet.yaml").write_text(yaml.safe_dump(config))
        self.processes.append(
            Process(
                "kubelet",
                [
                    binary("kubelet"),
                    f"--config={d / 'kubelet.yaml'}",
                    f"--kubeconfig={kubeconfig}",
                    f"--root-dir={self.kubelet_dir}",
                    f"--cert-dir={d / 'kubelet-pki'}",
                    f"--hostname-override={self.name}",
                    f"--node-ip={ip}",
                    "--v=1",
                ],
                d / "kubelet.log",
            )
        )

    def restart_kubelet(self) -> None:
        """Stop the kubelet and start it again with the same arguments, as systemd's Restart=always would; returns
        when the node is Ready again. Pods keep running in containerd meanwhile."""
        old = next(p for p in self.processes if p.name == "kubelet")
        old.stop()
        self.processes.remove(old)
        self.processes.append(Process("kubelet", old.argv, old.log))
        wait_for(f"node {self.name} Ready after a kubelet restart", self._ready, READY_TIMEOUT, self.processes)

    def _ready(self) -> bool:
        from kubernetes import client

        try:
            node = client.CoreV1Api(self.plane.api).read_node(self.name)
        except client.ApiException:
            return False
        if node.status is None:
            return False
        conditions = {c.type: c.status for c in node.status.conditions or []}
        taints = (node.spec.taints if node.spec is not None else None) or []
        return conditions.get("Ready") == "True" and not any(t.key == "node.kubernetes.io/not-ready" for t in taints)

    # --- teardown ---------------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Undo everything start() did, in reverse; safe to call on a half-started or stopped node."""
        if self.lock is not None:  # the lock is start()'s first step: a node without it changed nothing on the host
            self._undo_host_changes(self.lock)
        shutil.rmtree(self.directory, ignore_errors=True)

    def _undo_host_changes(self, lock: int) -> None:
        kubelet = next((p for p in self.processes if p.name == "kubelet"), None)
        if kubelet is not None:
            kubelet.stop()
        if self.containerd_socket.exists():
            self._remove_pods()
        for process in reversed(self.processes):
            process.stop()
        kill_matching("containerd-shim-runc-v2", str(self.containerd_socket))
        self._unmount_below(self.directory)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        for hierarchy in cgroup_hierarchies():
            root = hierarchy / self.cgroup_root.lstrip("/")
            if root.exists():
                for cgroup in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                    with contextlib.suppress(OSError):
                        cgroup.rmdir()
                with contextlib.suppress(OSError):
                    root.rmdir()
        _remove_firewall_rules(firewall_rules() - self.firewall)
        for key, value in self.sysctls.items():
            (Path("/proc/sys") / key).write_text(value)
        for path in reversed(self.created):
            self._unmount_below(path)  # /run/netns is bind-mounted onto itself
            shutil.rmtree(path, ignore_errors=True)
        NODE_LOCK.unlink(missing_ok=True)
        os.close(lock)
        self.lock = None

    def _remove_pods(self) -> None:
        crictl = [binary("crictl"), "--runtime-endpoint", f"unix://{self.containerd_socket}", "--timeout", "20s"]
        subprocess.run([*crictl, "rmp", "--all", "--force"], capture_output=True)

    @staticmethod
    def _unmount_below(directory: Path) -> None:
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        inside = (m for m in mounts if m == str(directory) or m.startswith(f"{directory}/"))
        for mount in sorted(inside, key=len, reverse=True):
            subprocess.run(["umount", "--lazy", mount], capture_output=True)

    def __enter__(self) -> KubeletNode:
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()


def firewall_rules() -> set[tuple[str, str, str]]:
    """The kubelet's iptables and ip6tables chains and rules now on the host, as (command, table, `-S` line)."""
    rules = set()
    for command in IPTABLES:
        for table in IPTABLES_TABLES:
            listing = subprocess.run([command, "-t", table, "-S"], capture_output=True, text=True).stdout
            rules |= {(command, table, line) for line in listing.splitlines() if "KUBE-" in line}
    return rules


def _remove_firewall_rules(rules: set[tuple[str, str, str]]) -> None:
    """Delete the rules first (-A -> -D), then flush and delete the chains (-N -> -X)."""
    for command, table, line in sorted(rules):
        if line.startswith("-A "):
            subprocess.run([command, "-t", table, "-D", *shlex.split(line)[1:]], capture_output=True)
    for command, table, line in sorted(rules):
        if line.startswith("-N "):
            chain = line.split()[1]
            subprocess.run([command, "-t", table, "-F", chain], capture_output=True)
            subprocess.run([command, "-t", table, "-X", chain], capture_output=True)
