"""The kubelet half of a DRA driver stand-in: prepares the fake devices of a claim for the containers that use it.

It stands in for the kubelet plugin of NVIDIA's DRA driver for GPUs (or a NIC DRA driver) on the test bed's real node,
which has no GPU: it registers with the kubelet through the plugin-registration API (its socket in the kubelet's
``plugins_registry``), serves the kubelet's DRA API (``k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin``), and prepares a
claim as a vendor driver does: it reads the claim's allocation from the API server and hands the container runtime one
CDI device per allocated device of its driver, whose edits are an environment variable and a read-only file naming
the device (as the device-plugin stand-in does). It proves the kubelet's DRA path (registration, prepare, CDI
injection, unprepare), not drivers. The API messages are our own .protos, compiled on first use. The devices' other
half, the ResourceSlices, is ``draslices``.
"""

from __future__ import annotations

import json
import shutil
import threading
from concurrent import futures
from pathlib import Path

import grpc

from railforge.k8s import dra, rest
from railforge.testbed.deviceplugin import DEVICE_MOUNT, compiled

DRA_SERVICE = "v1.DRAPlugin"  # how the kubelet names the service's version it chooses
HERE = Path(__file__).parent


def device_env(driver: str) -> str:
    """The variable a container sees for its devices of ``driver``: RAILFORGE_DRA_GPU_NVIDIA_COM=gpu-0,gpu-1."""
    return "RAILFORGE_DRA_" + driver.upper().replace(".", "_").replace("-", "_")


class FakeDraDriver:
    """The kubelet plugin of one DRA driver for the kubelet whose root directory is ``kubelet_dir``; ``api``: a
    client of the control plane (reads the claims it prepares); ``cdi_dir``: where the node's containerd reads CDI
    specs; ``state_dir``: where the per-device files containers mount are kept."""

    def __init__(self, driver: str, api, kubelet_dir: Path, cdi_dir: Path, state_dir: Path):
        self.driver, self.api = driver, api
        self.cdi_dir, self.state_dir = cdi_dir, state_dir / f"dra-{driver}"
        self.dra_pb, self.dra_rpc = compiled(HERE / "draplugin.proto")
        self.reg_pb, self.reg_rpc = compiled(HERE / "pluginregistration.proto")
        self.plugin_dir = kubelet_dir / "plugins" / driver
        self.registration = kubelet_dir / "plugins_registry" / f"{driver}-reg.sock"
        self.kind = f"{driver}/device"  # the CDI kind of its devices
        self.prepared: list[tuple[str, list[str]]] = []  # (claim uid, its devices), each time one was prepared
        self.unprepared: list[str] = []  # claim uids, each time one was unprepared
        self.registered = threading.Event()
        self.refusal = ""  # what the kubelet said when it refused the registration
        self.servers: list[grpc.Server] = []

    # --- the kubelet's DRA API ------------------------------------------------------------------------------

    def NodePrepareResources(self, request, context):
        answers = {}
        for claim in request.claims:
            path = f"{dra.API}/namespaces/{claim.namespace}/resourceclaims/{claim.name}"
            obj = rest.call(self.api, "GET", path)
            if obj["metadata"]["uid"] != claim.uid:
                answers[claim.uid] = self.dra_pb.NodePrepareResourceResponse(error=f"claim {claim.name} was replaced")
                continue
            results = ((obj.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
            mine = [r for r in results if r.get("driver") == self.driver]
            self._write_cdi(mine)
            self.prepared.append((claim.uid, [r["device"] for r in mine]))
            devices = [
                self.dra_pb.Device(
                    request_names=[r["request"]],
                    pool_name=r["pool"],
                    device_name=r["device"],
                    cdi_device_ids=[f"{self.kind}={r['device']}"],
                )
                for r in mine
            ]
            answers[claim.uid] = self.dra_pb.NodePrepareResourceResponse(devices=devices)
        return self.dra_pb.NodePrepareResourcesResponse(claims=answers)

    def NodeUnprepareResources(self, request, context):
        answers = {}
        for claim in request.claims:
            self.unprepared.append(claim.uid)
            answers[claim.uid] = self.dra_pb.NodeUnprepareResourceResponse()
        return self.dra_pb.NodeUnprepareResourcesResponse(claims=answers)

    def _write_cdi(self, results: list[dict]) -> None:
        """One CDI spec for the driver, every device prepared so far in it: an environment variable and a file."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        for result in results:
            (self.state_dir / result["device"]).write_text(
                f"{self.driver} {result['pool']}/{result['device']} (railforge stand-in, no hardware)\n"
            )
        devices = [
            {
                "name": file.name,
                "containerEdits": {
                    "env": [f"{device_env(self.driver)}_{file.name.upper().replace('-', '_')}={file.name}"],
                    "mounts": [
                        {
                            "hostPath": str(file),
                            "containerPath": f"{DEVICE_MOUNT}/{file.name}",
                            "options": ["ro", "bind"],
                        }
                    ],
                },
            }
            for file in sorted(self.state_dir.iterdir())
        ]
        spec = {"cdiVersion": "0.6.0", "kind": self.kind, "devices": devices}
        self.cdi_dir.mkdir(parents=True, exist_ok=True)
        (self.cdi_dir / f"railforge-{self.driver}.json").write_text(json.dumps(spec, indent=2))

    # --- plugin registration ----------------------------------------------------------------------------------

    def GetInfo(self, request, context):
        return self.reg_pb.PluginInfo(
            type="DRAPlugin",
            name=self.driver,
            endpoint=str(self.plugin_dir / "dra.sock"),
            supported_versions=[DRA_SERVICE],
        )

    def NotifyRegistrationStatus(self, request, context):
        if request.plugin_registered:
            self.registered.set()
        self.refusal = request.error
        return self.reg_pb.RegistrationStatusResponse()

    # --- lifecycle ------------------------------------------------------------------------------------------

    def start(self) -> FakeDraDriver:
        """Serve the DRA API, then the registration socket the kubelet's plugin watcher finds."""
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        self.registration.parent.mkdir(parents=True, exist_ok=True)
        for socket, add in (
            (self.plugin_dir / "dra.sock", lambda server: self.dra_rpc.add_DRAPluginServicer_to_server(self, server)),
            (self.registration, lambda server: self.reg_rpc.add_RegistrationServicer_to_server(self, server)),
        ):
            socket.unlink(missing_ok=True)
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
            add(server)
            server.add_insecure_port(f"unix://{socket}")
            server.start()
            self.servers.append(server)
        return self

    def stop(self) -> None:
        for server in self.servers:
            server.stop(grace=None)
        self.registration.unlink(missing_ok=True)
        shutil.rmtree(self.plugin_dir, ignore_errors=True)
        (self.cdi_dir / f"railforge-{self.driver}.json").unlink(missing_ok=True)
        shutil.rmtree(self.state_dir, ignore_errors=True)
