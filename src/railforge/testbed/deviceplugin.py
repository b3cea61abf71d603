"""A device-plugin stand-in: the kubelet device-plugin API (v1beta1) served in Python for devices that do not exist.

It stands in for NVIDIA's k8s-device-plugin (resource ``nvidia.com/gpu``) and Mellanox's k8s-rdma-shared-dev-plugin
or the SR-IOV network device plugin (``rdma/<rail>``) on test-bed nodes that have no GPU and no HCA: it registers N
fake devices with the real kubelet, keeps ListAndWatch open (resending on every health change), and answers Allocate
with what a vendor plugin hands a container: an environment variable naming the devices (as NVIDIA_VISIBLE_DEVICES
does) and a read-only mount of a per-device file. It proves the kubelet's accounting and admission path, not drivers.
The API messages are our own .proto (deviceplugin.proto), compiled on first use.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc

API_VERSION = "v1beta1"
DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")  # fixed by the API, whatever the kubelet's root-dir
KUBELET_SOCKET = "kubelet.sock"
DEVICE_MOUNT = "/var/run/railforge/devices"
PROTO = Path(__file__).with_name("deviceplugin.proto")


def compiled(proto: Path):
    """The generated message and service modules of ``proto`` (protoc runs once per .proto content, into the user's
    cache)."""
    digest = hashlib.sha256(proto.read_bytes()).hexdigest()[:12]
    out = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "railforge" / f"{proto.stem}-{digest}"
    if not (out / f"{proto.stem}_pb2_grpc.py").exists():
        from grpc_tools import protoc

        out.mkdir(parents=True, exist_ok=True)
        args = ["protoc", f"-I{proto.parent}", f"--python_out={out}", f"--grpc_python_out={out}", proto.name]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {proto}")
    if str(out) not in sys.path:
        sys.path.insert(0, str(out))
    return importlib.import_module(f"{proto.stem}_pb2"), importlib.import_module(f"{proto.stem}_pb2_grpc")


class FakeDevicePlugin:
    """N fake devices of one extended resource, registered with the kubelet of this host.

    resource: e.g. "nvidia.com/gpu" or "rdma/rail0"; env: the variable Allocate sets to the allocated IDs.
    plugin_dir: where this process finds the kubelet's sockets (the lab serves a node container's kubelet from the
    host through a bind mount); state_dir must be at the same path for the kubelet (Allocate names its files).
    """

    def __init__(
        self,
        resource: str,
        count: int,
        env: str,
        state_dir: Path,
        *,
        numa_node: int = 0,
        plugin_dir: Path = DEVICE_PLUGIN_DIR,
    ):
        self.resource, self.env, self.plugin_dir = resource, env, plugin_dir
        self.pb, self.rpc = compiled(PROTO)
        prefix = resource.split("/")[-1]
        self.healthy = {f"{prefix}-{index}": True for index in range(count)}
        self.numa_node = numa_node
        self.socket_name = f"railforge-{resource.replace('/', '_').replace('.', '_')}.sock"
        self.device_files = state_dir / self.socket_name.removesuffix(".sock")
        self.allocations: list[list[str]] = []
        self.registrations = 0
        self._changed = threading.Condition()
        self._generation = 0
        self._stopped = threading.Event()
        self._server: grpc.Server | None = None
        self._watcher: threading.Thread | None = None

    # --- the DevicePlugin service -------------------------------------------------------------------------

    def GetDevicePluginOptions(self, request, context):
        return self.pb.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=False)

    def _devices(self):
        topology = self.pb.TopologyInfo(nodes=[self.pb.NUMANode(ID=self.numa_node)])
        return [
            self.pb.Device(ID=device, health="Healthy" if healthy else "Unhealthy", topology=topology)
            for device, healthy in self.healthy.items()
        ]

    def ListAndWatch(self, request, context):
        seen = -1
        while context.is_active() and not self._stopped.is_set():
            with self._changed:
                if seen == self._generation:
                    self._changed.wait(timeout=1)
                    continue
                seen = self._generation
                devices = self._devices()
            yield self.pb.ListAndWatchResponse(devices=devices)

    def GetPreferredAllocation(self, request, context):
        return self.pb.PreferredAllocationResponse()

    def Allocate(self, request, context):
        responses = []
        for container in request.container_requests:
            ids = list(container.devices_ids)
            unknown = [device for device in ids if device not in self.healthy]
            if unknown:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown devices {unknown}")
            self.allocations.append(ids)
            mounts = [
                self.pb.Mount(
                    container_path=f"{DEVICE_MOUNT}/{device}", host_path=str(self.device_files / device), read_only=True
                )
                for device in ids
            ]
            responses.append(self.pb.ContainerAllocateResponse(envs={self.env: ",".join(ids)}, mounts=mounts))
        return self.pb.AllocateResponse(container_responses=responses)

    def PreStartContainer(self, request, context):
        return self.pb.PreStartContainerResponse()

    # --- lifecycle ------------------------------------------------------------------------------------------

    def set_health(self, device: str, healthy: bool) -> None:
        with self._changed:
            self.healthy[device] = healthy
            self._generation += 1
            self._changed.notify_all()

    def start(self) -> FakeDevicePlugin:
        """Serve on our socket first, then register (the order the kubelet expects); when the kubelet restarts (it
        recreates its socket and empties the directory, ours included), serve again and register again."""
        self.device_files.mkdir(parents=True, exist_ok=True)
        for device in self.healthy:
            (self.device_files / device).write_text(f"{self.resource} {device} (railforge stand-in, no hardware)\n")
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        # A Node object left Ready by an earlier kubelet of the same name can make a node look ready before its new
        # kubelet listens, and that kubelet's socket file may still be there, refusing connections; a kubelet that
        # starts meanwhile empties the directory, our socket included: serve and register again until it takes.
        deadline = time.monotonic() + 60
        while True:
            try:
                self._serve()
                registered = self._register()
                break
            except (OSError, grpc.RpcError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        self._watcher = threading.Thread(target=self._reregister, args=(registered,), daemon=True)
        self._watcher.start()
        return self

    def _serve(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None)
        socket = self.plugin_dir / self.socket_name
        socket.unlink(missing_ok=True)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self.rpc.add_DevicePluginServicer_to_server(self, self._server)
        self._server.add_insecure_port(f"unix://{socket}")
        self._server.start()

    def _register(self) -> tuple[int, int]:
        """Register with the kubelet; returns the identity of the kubelet socket registered with."""
        kubelet = self.plugin_dir / KUBELET_SOCKET
        identity = _identity(kubelet)
        with grpc.insecure_channel(f"unix://{kubelet}") as channel:
            self.rpc.RegistrationStub(channel).Register(
                self.pb.RegisterRequest(
                    version=API_VERSION,
                    endpoint=self.socket_name,
                    resource_name=self.resource,
                    options=self.pb.DevicePluginOptions(),
                ),
                timeout=10,
            )
        self.registrations += 1
        return identity

    def _reregister(self, registered: tuple[int, int]) -> None:
        kubelet = self.plugin_dir / KUBELET_SOCKET
        while not self._stopped.wait(0.5):
            try:
                if _identity(kubelet) != registered:
                    self._serve()
                    registered = self._register()
            except (OSError, grpc.RpcError):
                continue  # the kubelet is restarting: try again on the next tick

    def stop(self) -> None:
        self._stopped.set()
        with self._changed:
            self._changed.notify_all()
        if self._watcher is not None:
            self._watcher.join()  # first: it may be serving again
        if self._server is not None:
            self._server.stop(grace=1).wait()
        (self.plugin_dir / self.socket_name).unlink(missing_ok=True)


def _identity(path: Path) -> tuple[int, int]:
    # A restarted kubelet recreates its socket; the inode number alone may be reused, the change time is not.
    status = path.stat()
    return status.st_ino, status.st_ctime_ns
