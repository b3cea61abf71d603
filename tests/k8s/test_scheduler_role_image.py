"""The scheduler from its built image (deploy/scheduler/build.sh), on the real test-bed node, as the role deploys it:
the pod is the role's Deployment template with the role's ServiceAccount and settings, bound to the real node.
It elects itself leader under the role's RBAC, binds a gang on API-only nodes and serves /metrics.

Three changes to the template, all for the test bed: host networking and a kubeconfig naming the loopback API
server (this bed runs no kube-proxy, so the in-cluster Service address leads nowhere; the kubeconfig carries no
credential, only the mounted ServiceAccount token's path), and no kubelet probes (they would go to the host's
address; the test asks /readyz on loopback instead)."""

import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from conftest import POOL_LABEL, ROOT, Cluster, eventually
from k8s_helpers import scheduler_play, scrape, value
from kubernetes import client

from railforge.testbed.node import NODE_LOCK, KubeletNode
from railforge.testbed.procs import free_port

NAMESPACE = "rf-image"
SCHEDULER = "image-test"
NODE_WAIT_SECONDS = 900  # another session's real node (one per host) may hold the lock that long
TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


@pytest.fixture(scope="module")
def real_node(control_plane):
    """The real node; while another test run holds the one-node-per-host lock, wait and try again."""
    deadline = time.monotonic() + NODE_WAIT_SECONDS
    while True:
        try:
            started = KubeletNode.start(control_plane)
            break
        except RuntimeError as error:
            if str(NODE_LOCK) not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(15)
    yield started
    started.stop()


def build_image(tmp_path: Path) -> tuple[str, Path]:
    archive = tmp_path / "scheduler.tar"
    env = {**os.environ, "RAILFORGE_SCHEDULER_ARCHIVE": str(archive)}
    result = subprocess.run([ROOT / "deploy/scheduler/build.sh"], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1], archive


def test_the_scheduler_runs_from_its_image_on_the_real_node(control_plane, scheduler_crds, real_node, tmp_path):
    image, archive = build_image(tmp_path)
    real_node.ctr("images", "import", str(archive))
    cluster = Cluster(control_plane, SCHEDULER)  # its namespace, node pool and pods' scheduler name
    settings = {"scheduler_name": SCHEDULER, "node_selector": f"{POOL_LABEL}={SCHEDULER}", "min_period_seconds": 0.05}
    applied = scheduler_play(
        control_plane, tmp_path, railforge_scheduler_namespace=NAMESPACE, railforge_scheduler_settings=settings
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr
    core = client.CoreV1Api(control_plane.api)
    template = client.AppsV1Api(control_plane.api).read_namespaced_deployment("railforge-scheduler", NAMESPACE)
    spec = control_plane.api.sanitize_for_serialization(template.spec.template.spec)
    container = spec["containers"][0]
    assert container["image"] == image  # what the role deploys is what build.sh built

    # files, not *-data: the client would write those to a temporary file, and the root file system is read-only
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "bed", "cluster": {"server": control_plane.server, "certificate-authority": "/etc/kube/ca.crt"}}
        ],
        "users": [{"name": "scheduler", "user": {"tokenFile": TOKEN}}],
        "contexts": [{"name": "bed", "context": {"cluster": "bed", "user": "scheduler"}}],
        "current-context": "bed",
    }
    core.create_namespaced_config_map(
        NAMESPACE,
        {
            "metadata": {"name": "bed-kubeconfig"},
            "data": {"config": yaml.safe_dump(kubeconfig), "ca.crt": Path(control_plane.ca.cert_path).read_text()},
        },
    )
    port = free_port()
    container["args"] = [arg for arg in container["args"] if not arg.startswith("--http-address=")]
    container["args"] += ["--kubeconfig=/etc/kube/config", f"--http-address=127.0.0.1:{port}"]
    container["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
    container["volumeMounts"].append({"name": "kubeconfig", "mountPath": "/etc/kube", "readOnly": True})
    spec["volumes"].append({"name": "kubeconfig", "configMap": {"name": "bed-kubeconfig"}})
    spec.update(nodeName=real_node.name, hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    # the kubelet would probe the host's own address; the test asks the same endpoints on loopback instead
    del container["readinessProbe"], container["livenessProbe"]
    core.create_namespaced_pod(NAMESPACE, {"metadata": {"name": "scheduler-on-node"}, "spec": spec})
    try:
        url = f"http://127.0.0.1:{port}"

        def ready() -> None:
            pod = core.read_namespaced_pod("scheduler-on-node", NAMESPACE)
            assert pod.status.phase == "Running", pod.status.phase
            try:
                status = urllib.request.urlopen(f"{url}/readyz", timeout=5).status
            except OSError as error:  # not listening yet, or 503 until every watch has synced
                logs = "".join(
                    path.read_text()[-3000:]
                    for path in (real_node.directory / "pod-logs").glob(f"{NAMESPACE}_*/*/*.log")
                )
                restarts = pod.status.container_statuses[0].restart_count
                raise AssertionError(f"{error}; restarts {restarts}\n{logs}") from None
            assert status == 200

        eventually(ready, timeout=120)  # every watch synced, through the role's RBAC
        cluster.add_nodes(2, gpus=8)
        cluster.gang("image-gang", 2, gpus=8)
        cluster.wait("the gang bound", lambda: len(cluster.bound("image-gang")) == 2, timeout=60)

        def counted() -> dict:
            samples = scrape(url)
            assert value(samples, "railforge_binds_total", queue="default") == 2
            return samples

        samples = eventually(counted)
        assert value(samples, "railforge_leader") == 1  # elected under the role's Lease RBAC
        lease = client.CoordinationV1Api(control_plane.api).read_namespaced_lease(SCHEDULER, NAMESPACE)
        assert lease.spec.holder_identity == "scheduler-on-node"
        with urllib.request.urlopen(f"{url}/", timeout=10) as page:
            assert b"railforge scheduler" in page.read()
    finally:
        core.delete_namespaced_pod("scheduler-on-node", NAMESPACE, grace_period_seconds=0)
