"""A real Kubernetes control plane on loopback: etcd, kube-apiserver (TLS, Node,RBAC, service-account keys) and
kube-controller-manager, on free ports in a temporary directory; kube-scheduler on request.

    with ControlPlane.start() as cp:
        api = cp.client()          # kubernetes.client.ApiClient as cluster admin
        ...

stop() stops exactly the processes start() started (by their own handles, TERM then KILL) and removes the
directory; the processes also die with the Python process that started them.
"""

from __future__ import annotations

import functools
import json
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict

from railforge.testbed import pki
from railforge.testbed.build import binary
from railforge.testbed.procs import Process, free_port, wait_for

SERVICE_CIDR = "10.96.0.0/16"
# API-only nodes send no heartbeats; the node-lifecycle controller must not mark them unreachable during a run.
NODE_MONITOR_GRACE = "24h"
READY_TIMEOUT = 60
# The feature gates of Kubernetes' own gang scheduling (1.36: the Workload and PodGroup API, and the scheduler's
# GangScheduling plugin, which needs the first).
NATIVE_GANG_GATES = "GenericWorkload=true,GangScheduling=true"
# ... and the Job controller's: an Indexed Job of N pods (completions = parallelism > 1) gets its Workload and a
# PodGroup of minimum count N, which its pods join (the API server validates such Jobs, so it has the gate too)
JOB_GANG_GATES = f"{NATIVE_GANG_GATES},WorkloadWithJob=true"


@dataclass
class ControlPlane:
    directory: Path
    ca: pki.CertificateAuthority
    server: str
    admin_kubeconfig: Path
    processes: list[Process] = field(default_factory=list)
    ready_seconds: float = 0.0

    @classmethod
    def start(cls, *, scheduler: bool = False) -> ControlPlane:
        directory = Path(tempfile.mkdtemp(prefix="rf-cp-"))
        try:
            plane = cls._start(directory)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        try:
            if scheduler:
                plane.start_scheduler()
        except BaseException:
            plane.stop()
            raise
        return plane

    @classmethod
    def _start(cls, directory: Path) -> ControlPlane:
        started = time.monotonic()
        ca = pki.CertificateAuthority(directory / "pki")
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        server = f"https://127.0.0.1:{api_port}"
        admin_cert, admin_key = ca.issue("admin", "railforge-admin", "system:masters")
        plane = cls(
            directory,
            ca,
            server,
            pki.kubeconfig(directory / "admin.conf", server, ca.cert_path, admin_cert, admin_key, "admin"),
        )
        try:
            plane.launch(
                "etcd",
                [
                    binary("etcd"),
                    "--name=railforge",
                    f"--data-dir={directory / 'etcd'}",
                    f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                    f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                    f"--initial-cluster=railforge=http://127.0.0.1:{peer_port}",
                    "--unsafe-no-fsync",  # a throw-away store: speed over durability
                    "--log-level=warn",
                ],
            )
            serving = ca.issue(
                "apiserver",
                "kube-apiserver",
                server_names=(
                    "127.0.0.1",
                    "localhost",
                    "10.96.0.1",
                    "kubernetes",
                    "kubernetes.default",
                    "kubernetes.default.svc",
                    "kubernetes.default.svc.cluster.local",
                ),
                client=False,
            )
            kubelet_client = ca.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters")
            sa_key, sa_pub = pki.service_account_keys(directory / "pki")
            plane.launch(
                "kube-apiserver",
                [
                    binary("kube-apiserver"),
                    f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    "--endpoint-reconciler-type=none",  # the default reconciler refuses a loopback address
                    f"--secure-port={api_port}",
                    f"--cert-dir={directory / 'apiserver'}",
                    f"--tls-cert-file={serving[0]}",
                    f"--tls-private-key-file={serving[1]}",
                    f"--client-ca-file={ca.cert_path}",
                    "--authorization-mode=Node,RBAC",
                    "--enable-admission-plugins=NodeRestriction",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    f"--service-account-key-file={sa_pub}",
                    f"--service-account-signing-key-file={sa_key}",
                    f"--service-cluster-ip-range={SERVICE_CIDR}",
                    f"--kubelet-client-certificate={kubelet_client[0]}",
                    f"--kubelet-client-key={kubelet_client[1]}",
                    "--kubelet-preferred-address-types=InternalIP",  # never a DNS lookup of a node name
                    "--allow-privileged=true",
                    "--profiling=false",
                    # Kubernetes' own gangs (alpha in 1.36): the API a scheduler started with the gates reads
                    f"--feature-gates={JOB_GANG_GATES}",
                    "--runtime-config=scheduling.k8s.io/v1alpha2=true",
                ],
            )
            wait_for("kube-apiserver /readyz", plane._ready, READY_TIMEOUT, plane.processes)
            plane.launch(
                "kube-controller-manager",
                [
                    binary("kube-controller-manager"),
                    *plane._component_flags("controller-manager", "system:kube-controller-manager"),
                    f"--service-account-private-key-file={sa_key}",
                    f"--root-ca-file={ca.cert_path}",
                    "--use-service-account-credentials=true",
                    f"--cluster-signing-cert-file={ca.cert_path}",
                    f"--cluster-signing-key-file={ca.key_path}",
                    f"--node-monitor-grace-period={NODE_MONITOR_GRACE}",
                    f"--feature-gates={JOB_GANG_GATES}",
                ],
            )
            wait_for("the default ServiceAccount", plane._default_service_account, READY_TIMEOUT, plane.processes)
        except BaseException:
            plane.stop()
            raise
        plane.ready_seconds = time.monotonic() - started
        return plane

    def _component_flags(self, name: str, user: str) -> list[str]:
        cert, key = self.ca.issue(name, user)
        config = pki.kubeconfig(self.directory / f"{name}.conf", self.server, self.ca.cert_path, cert, key, name)
        return [
            f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--leader-elect=false",
        ]

    def launch(self, name: str, argv: list[str]) -> Process:
        """Start a component of the plane, logging to NAME.log in its directory; stop() stops it."""
        process = Process(name, argv, self.directory / f"{name}.log")
        self.processes.append(process)
        return process

    def _get(self, path: str) -> tuple[int, bytes]:
        context = ssl.create_default_context(cafile=str(self.ca.cert_path))
        context.load_cert_chain(self.directory / "pki/admin.crt", self.directory / "pki/admin.key")
        try:
            with urllib.request.urlopen(self.server + path, context=context, timeout=5) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def _ready(self) -> bool:
        return self._get("/readyz")[0] == 200

    def _default_service_account(self) -> bool:
        return self._get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200

    def start_scheduler(self, *, native_gangs: bool = False) -> Process:
        """The default kube-scheduler (benchmarks compare against it); with ``native_gangs`` its gang scheduling of
        scheduling.k8s.io PodGroups on (the GangScheduling plugin of the default profile)."""
        flags = [f"--feature-gates={NATIVE_GANG_GATES}"] if native_gangs else []
        return self._start_scheduler(
            "kube-scheduler",
            [binary("kube-scheduler"), *self._component_flags("scheduler", "system:kube-scheduler"), *flags],
        )

    def start_coscheduling_scheduler(self) -> Process:
        """scheduler-plugins' kube-scheduler (an arena peer: build it first) with the coscheduling plugin in the
        default profile, configured as the plugin's README does, gangs of scheduling.x-k8s.io PodGroups. It runs as
        system:kube-scheduler, also allowed to read PodGroups."""
        from kubernetes import client

        group, name = "rbac.authorization.k8s.io", "railforge-testbed:coscheduling"
        rbac = client.RbacAuthorizationV1Api(self.api)
        if not rbac.list_cluster_role(field_selector=f"metadata.name={name}").items:
            read = client.V1PolicyRule(
                api_groups=["scheduling.x-k8s.io"], resources=["podgroups"], verbs=["get", "list", "watch"]
            )
            rbac.create_cluster_role(client.V1ClusterRole(metadata=client.V1ObjectMeta(name=name), rules=[read]))
            rbac.create_cluster_role_binding(
                client.V1ClusterRoleBinding(
                    metadata=client.V1ObjectMeta(name=name),
                    role_ref=client.V1RoleRef(api_group=group, kind="ClusterRole", name=name),
                    subjects=[client.RbacV1Subject(api_group=group, kind="User", name="system:kube-scheduler")],
                )
            )
        coscheduling = {"name": "Coscheduling"}
        plugins = {
            "multiPoint": {"enabled": [coscheduling]},
            "queueSort": {"enabled": [coscheduling], "disabled": [{"name": "*"}]},
        }
        profile = {"schedulerName": "default-scheduler", "plugins": plugins}
        return self.start_configured_scheduler("scheduler-plugins", "kube-scheduler-plugins", {"profiles": [profile]})

    def start_configured_scheduler(self, name: str, binary_name: str, configuration: dict) -> Process:
        """A kube-scheduler (``binary_name``: kube-scheduler, or an arena peer's build) with a configuration file
        (KubeSchedulerConfiguration) of ``configuration``'s fields. Flags are ignored beside such a file, so the
        kubeconfig and leader election move into it too."""
        flags = self._component_flags(name, "system:kube-scheduler")
        kubeconfig = next(flag.removeprefix("--kubeconfig=") for flag in flags if flag.startswith("--kubeconfig="))
        connection = {"kubeconfig": kubeconfig, **configuration.get("clientConnection", {})}
        config = self.directory / f"{name}.yaml"
        config.write_text(
            json.dumps(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "leaderElection": {"leaderElect": False},
                    **configuration,
                    "clientConnection": connection,
                }
            )
        )
        kept = [flag for flag in flags if flag.split("=")[0] not in ("--kubeconfig", "--leader-elect")]
        return self._start_scheduler(name, [binary(binary_name), f"--config={config}", *kept])

    def _start_scheduler(self, name: str, argv: list[str]) -> Process:
        process = self.launch(name, argv)
        port = next(a.split("=")[1] for a in process.argv if a.startswith("--secure-port="))
        wait_for(f"{name} /healthz", lambda: _healthz(int(port)), READY_TIMEOUT, [process])
        return process

    def apply_crds(self, paths: list[Path]) -> None:
        """Apply CRD files (server-side, so a re-apply updates) and wait until each is Established."""
        kubectl = [binary("kubectl"), f"--kubeconfig={self.admin_kubeconfig}"]
        files = [f"--filename={path}" for path in paths]
        for action in (["apply", "--server-side"], ["wait", "--for=condition=Established", "--timeout=60s"]):
            subprocess.run([*kubectl, *action, *files], check=True, capture_output=True)

    def stop_component(self, process: Process) -> None:
        """Stop a component started on request (the start_*scheduler methods) and forget it: the plane's waits watch
        the rest."""
        process.stop()
        self.processes.remove(process)

    def client(self):
        """A new kubernetes.client.ApiClient authenticated as cluster admin (close it when done)."""
        from kubernetes import config

        return config.new_client_from_config(str(self.admin_kubeconfig))

    @functools.cached_property
    def api(self):
        """One shared admin ApiClient for the helpers' own calls; closed by stop()."""
        return self.client()

    def stop(self) -> None:
        if "api" in self.__dict__:
            self.api.close()
        for process in reversed(self.processes):
            process.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()


def _healthz(port: int) -> bool:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # self-signed serving cert, loopback only
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=2) as response:
        return response.status == 200


class Taint(TypedDict):
    key: str
    effect: str
    value: NotRequired[str]


def add_api_node(
    plane: ControlPlane,
    name: str,
    allocatable: dict[str, str],
    labels: dict[str, str] | None = None,
    taints: list[Taint] | None = None,
) -> None:
    """A node object with no kubelet behind it: Ready, with the given allocatable resources (nvidia.com/gpu,
    rdma/..., cpu, memory, pods), labels and taints, and none of the lifecycle taints once this returns. It stays
    Ready for the plane's life: the controller manager's node-monitor grace period outlasts any test session."""
    from kubernetes import client

    core = client.CoreV1Api(plane.api)
    resources = {"pods": "110", **allocatable}
    core.create_node(
        client.V1Node(
            metadata=client.V1ObjectMeta(name=name, labels={"kubernetes.io/hostname": name, **(labels or {})}),
            spec=client.V1NodeSpec(taints=[client.V1Taint(**taint) for taint in taints or []] or None),
        )
    )
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "APIOnlyNode",
        "message": "no kubelet: a test-bed stand-in",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    core.patch_node_status(name, {"status": {"capacity": resources, "allocatable": resources, "conditions": [ready]}})

    def untainted() -> bool:
        spec = core.read_node(name).spec
        taints = (spec.taints if spec is not None else None) or []
        return not any(t.key.startswith("node.kubernetes.io/") for t in taints)

    wait_for(f"API-only node {name} untainted", untainted, READY_TIMEOUT, plane.processes)


def create_namespace(plane: ControlPlane, name: str) -> None:
    """A namespace that accepts pods: it waits for the `default` ServiceAccount, without which pods are refused."""
    from kubernetes import client

    core = client.CoreV1Api(plane.api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))

    def has_default_account() -> bool:
        try:
            core.read_namespaced_service_account("default", name)
        except client.ApiException:
            return False
        return True

    wait_for(f"namespace {name}'s default ServiceAccount", has_default_account, READY_TIMEOUT, plane.processes)
