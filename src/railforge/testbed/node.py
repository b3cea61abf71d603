"""A real Kubernetes node on this host: containerd + runc + Debian's CNI plugins + a kubelet, joined to a
ControlPlane, running real pods from locally built images (no registry).

Host processes, not a Podman node container: the control plane listens on loopback only, and a node container
would need its own network to keep pods off the host's, and then could not reach loopback; measured in
../shared/research/nested-containerd.md, both work, and the host path has no image or nesting to prepare. The price
is that the node touches the host, so start() records and stop() undoes each change, in reverse:

- processes: containerd and kubelet (by their handles), then any containerd shim still serving our socket;
- mounts under the node's directory (pod volumes), then the directory itself;
- network: the CNI bridge (one per node, named after it) and the host-local IP store (kept in the node's directory);
- cgroups: the kubelet's cgroup root ``/railforge-<node>`` in every v1 hierarchy, removed bottom-up;
- sysctls the kubelet rewrites host-wide (vm.overcommit_memory, vm.panic_on_oom, kernel.panic, kernel.panic_on_oops,
  kernel.keys.root_maxkeys, kernel.keys.root_maxbytes): the values found at start are written back;
- /var/lib/kubelet/device-plugins (fixed by the device-plugin API), /run/containerd (the shims' runc state and
  sockets) and /var/lib/cni (libcni's result cache): each removed when start() created it.

One node per host at a time (the device-plugin path and the kubelet's host-wide settings are shared).
"""

from __future__ import annotations

import contextlib
import json
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
class Node:
    name: str
    plane: ControlPlane
    directory: Path
    bridge: str
    processes: list[Process] = field(default_factory=list)
    sysctls: dict[str, str] = field(default_factory=dict)
    created: list[Path] = field(default_factory=list)  # host directories that did not exist before start()
    ready_seconds: float = 0.0

    @property
    def cgroup_root(self) -> str:
        return f"/railforge-{self.name}"

    @property
    def containerd_socket(self) -> Path:
        return self.directory / "containerd.sock"

    @classmethod
    def start(cls, plane: ControlPlane, name: str = "rf-node-0") -> Node:
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
        # Paths outside the node's directory that these components use whatever they are told: the device-plugin
        # directory (fixed by the API), the shims' runc state and sockets, libcni's result cache.
        for path in (DEVICE_PLUGIN_DIR.parent, Path("/run/containerd"), Path("/var/lib/cni")):
            if not path.exists():
                self.created.append(path)
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
                    "isGateway": True,
                    "ipMasq": False,  # pod traffic stays among the namespaces this node made
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

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true  # no CAP_SYS_RESOURCE on these hosts
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
                    f"--root-dir={d / 'kubelet'}",
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
        conditions = {c.type: c.status for c in node.status.conditions or []}
        return conditions.get("Ready") == "True" and not any(
            t.key == "node.kubernetes.io/not-ready" for t in node.spec.taints or []
        )

    # --- teardown ---------------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Undo everything start() did, in reverse; safe to call on a half-started node."""
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
        for key, value in self.sysctls.items():
            (Path("/proc/sys") / key).write_text(value)
        for path in reversed(self.created):
            shutil.rmtree(path, ignore_errors=True)
        shutil.rmtree(self.directory, ignore_errors=True)

    def _remove_pods(self) -> None:
        crictl = [binary("crictl"), "--runtime-endpoint", f"unix://{self.containerd_socket}", "--timeout", "20s"]
        subprocess.run([*crictl, "rmp", "--all", "--force"], capture_output=True)

    @staticmethod
    def _unmount_below(directory: Path) -> None:
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m.startswith(f"{directory}/")), key=len, reverse=True):
            subprocess.run(["umount", "--lazy", mount], capture_output=True)

    def __enter__(self) -> Node:
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()
