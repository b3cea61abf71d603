"""Kueue against the test bed's control plane: an arena peer that admits Jobs by quota in front of kube-scheduler.

Built from its pinned module on the arena's first run (``ARENA_PEERS``), with the CRDs of the same release. Its
controller manager runs as a host process, configured as Kueue's documentation recommends for jobs whose pods must
all run together ("all-or-nothing with ready Pods": ``waitForPodsReady`` with ``blockAdmission``, a 10 minute
timeout, requeued from the eviction), with the batch/v1 Job integration only. A Job is submitted suspended and
labelled with a LocalQueue (``QUEUE_LABEL``); Kueue admits it when its whole request fits the ClusterQueue's quota and
un-suspends it; the Job controller makes its pods and kube-scheduler binds them.

What differs from a deployment, none of it a scheduling setting: the manager runs as cluster admin on loopback, with
its webhooks served but not registered (the arena submits its Jobs suspended, as the Job webhook would make them),
without the on-demand visibility API (another server), and with serving certificates of the test bed's CA instead of
its own rotation. It reads its metrics certificate from a fixed path, /etc/kueue/metrics/certs, when it does not
manage its certificates: it is given one there in a mount namespace of its own (an overlay on /etc), so that the host's
/etc is never written.
"""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path

from railforge.scheduler import GPU
from railforge.testbed.build import KUEUE_CRDS, binary, component
from railforge.testbed.controlplane import READY_TIMEOUT, ControlPlane
from railforge.testbed.procs import Process, free_port, wait_for

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # on a Job: the LocalQueue (of its namespace) it is submitted to
FLAVOR = "default-flavor"
METRICS_CERTS = "/etc/kueue/metrics/certs"


def apply_crds(plane: ControlPlane) -> None:
    """Every CRD of the pinned release, Established."""
    plane.apply_crds([component("kueue").out_dir / f"{name}.yaml" for name in KUEUE_CRDS])


def start_kueue(plane: ControlPlane, workdir: Path) -> Process:
    """Kueue's controller manager (its CRDs applied first: ``apply_crds``), ready, its configuration and certificates
    in workdir; stop it with the plane's stop_component."""
    workdir.mkdir(parents=True, exist_ok=True)
    certs = workdir / "certs"
    certs.mkdir(exist_ok=True)
    cert, key = plane.ca.issue("kueue", "kueue", server_names=("127.0.0.1",), client=False)
    shutil.copy(cert, certs / "tls.crt")
    shutil.copy(key, certs / "tls.key")
    health = free_port()
    configuration = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        "metrics": {"bindAddress": f"127.0.0.1:{free_port()}"},
        "webhook": {"host": "127.0.0.1", "port": free_port(), "certDir": str(certs)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 50, "burst": 100},  # the release's own configuration's
        "waitForPodsReady": {
            "timeout": "10m",
            "blockAdmission": True,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
        },
        "integrations": {"frameworks": ["batch/job"]},
        "featureGates": {"VisibilityOnDemand": False},
    }
    config = workdir / "kueue.yaml"
    config.write_text(json.dumps(configuration, indent=2) + "\n")
    upper, overlay_work = workdir / "etc-upper", workdir / "etc-work"
    metrics_certs = upper / Path(METRICS_CERTS).relative_to("/etc")
    metrics_certs.parent.mkdir(parents=True, exist_ok=True)
    overlay_work.mkdir(exist_ok=True)
    metrics_certs.unlink(missing_ok=True)
    metrics_certs.symlink_to(certs)
    mount = f"mount -t overlay overlay -o lowerdir=/etc,upperdir={upper},workdir={overlay_work} /etc"
    manager = f"exec {binary('kueue')} --config={config} --kubeconfig={plane.admin_kubeconfig}"
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", f"{mount} && {manager}"]
    process = plane.launch("kueue", argv)
    wait_for("kueue /readyz", lambda: _ready(health), READY_TIMEOUT, plane.processes)
    return process


def _ready(port: int) -> bool:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
        return response.status == 200


def add_cluster_queue(plane: ControlPlane, name: str, gpus: int) -> None:
    """A ClusterQueue of ``gpus`` GPUs (one ResourceFlavor, every namespace); one that exists is kept."""
    quota = {"name": FLAVOR, "resources": [{"name": GPU, "nominalQuota": gpus}]}
    spec = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": [GPU], "flavors": [quota]}]}
    _create(plane, "resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": FLAVOR}})
    _create(plane, "clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})


def add_local_queue(plane: ControlPlane, namespace: str, name: str, cluster_queue: str) -> None:
    """A LocalQueue ``name`` in ``namespace`` that submits to ``cluster_queue``."""
    body = {"kind": "LocalQueue", "metadata": {"name": name}, "spec": {"clusterQueue": cluster_queue}}
    _create(plane, "localqueues", body, namespace)


def _create(plane: ControlPlane, plural: str, body: dict, namespace: str | None = None) -> None:
    from kubernetes import client

    custom = client.CustomObjectsApi(plane.api)
    body = {"apiVersion": f"{GROUP}/{VERSION}", **body}
    try:
        if namespace is None:
            custom.create_cluster_custom_object(GROUP, VERSION, plural, body)
        else:
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body)
    except client.ApiException as error:
        if error.status != 409:  # AlreadyExists: kept
            raise
