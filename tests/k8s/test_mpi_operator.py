"""The real Kubeflow MPI operator, out of cluster, with gang scheduling named: an MPIJob yields the launcher, the
workers and a scheduling.x-k8s.io/v1alpha1 PodGroup. CRDs and RBAC come from the pinned release module."""

import subprocess

import pytest
from kubernetes import client

from railforge.testbed import pki
from railforge.testbed.build import binary, component
from railforge.testbed.controlplane import create_namespace
from railforge.testbed.procs import Process, wait_for

SCHEDULER = "railforge"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
IMAGE = "localhost/railforge-testpod:1"


def kubectl(plane, *args: str) -> str:
    result = subprocess.run(
        [binary("kubectl"), f"--kubeconfig={plane.admin_kubeconfig}", *args], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def mpi_operator(control_plane):
    release = component("mpi-operator").out_dir
    crds = [release / "kubeflow.org_mpijobs.yaml", release / "scheduling.x-k8s.io_podgroups.yaml"]
    kubectl(control_plane, "apply", "--server-side", *(f"--filename={crd}" for crd in crds))
    extensions = client.ApiextensionsV1Api(control_plane.api)

    def established() -> bool:
        for name in ("mpijobs.kubeflow.org", "podgroups.scheduling.x-k8s.io"):
            conditions = extensions.read_custom_resource_definition(name).status.conditions or []
            if not any(c.type == "Established" and c.status == "True" for c in conditions):
                return False
        return True

    wait_for("the CRDs to be established", established, 60)
    # Least privilege: the operator runs as its own user, bound to the release's ClusterRole only.
    kubectl(control_plane, "apply", "--server-side", f"--filename={release / 'cluster-role.yaml'}")
    kubectl(
        control_plane,
        "create",
        "clusterrolebinding",
        "mpi-operator",
        "--clusterrole=mpi-operator",
        "--user=mpi-operator",
    )
    create_namespace(control_plane, "mpi-operator")  # its leader-election Lease lives there
    cert, key = control_plane.ca.issue("mpi-operator", "mpi-operator")
    config = pki.kubeconfig(
        control_plane.directory / "mpi-operator.conf",
        control_plane.server,
        control_plane.ca.cert_path,
        cert,
        key,
        "mpi-operator",
    )
    operator = Process(
        "mpi-operator",
        [
            binary("mpi-operator"),
            f"--kubeConfig={config}",
            f"--gang-scheduling={SCHEDULER}",
            "--lock-namespace=mpi-operator",
            "--monitoring-port=0",
        ],
        control_plane.directory / "mpi-operator.log",
    )
    try:
        leases = client.CoordinationV1Api(control_plane.api)
        wait_for("the mpi-operator to lead", lambda: leases.list_namespaced_lease("mpi-operator").items, 60, [operator])
        yield operator
    finally:
        operator.stop()


def mpijob(name: str, workers: int) -> dict:
    def template(role: str, command: list[str], limits: dict) -> dict:
        return {
            "spec": {
                "containers": [
                    {
                        "name": role,
                        "image": IMAGE,
                        "command": command,
                        "resources": {"requests": limits, "limits": limits},
                    }
                ]
            }
        }

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": 8,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template("launcher", ["echo", "mpirun"], {"cpu": "1"})},
                "Worker": {
                    "replicas": workers,
                    "template": template("worker", ["sleep", "3600"], {"nvidia.com/gpu": "8", "cpu": "4"}),
                },
            },
        },
    }


def test_an_mpijob_yields_launcher_workers_and_a_podgroup(control_plane, mpi_operator):
    create_namespace(control_plane, "mpi")
    custom = client.CustomObjectsApi(control_plane.api)
    custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", "mpi", "mpijobs", mpijob("allreduce", 2))
    core = client.CoreV1Api(control_plane.api)

    def gang_pods():
        return core.list_namespaced_pod("mpi", label_selector=f"{GROUP_LABEL}=allreduce").items

    wait_for("launcher and workers", lambda: len(gang_pods()) == 3, 60, [mpi_operator])
    group = custom.get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", "mpi", "podgroups", "allreduce")
    assert group["spec"]["minMember"] == 3  # two workers + the launcher
    assert group["spec"]["minResources"] == {"cpu": "9", "nvidia.com/gpu": "16"}  # what the three request
    assert group["metadata"]["ownerReferences"][0]["kind"] == "MPIJob"
    pods = gang_pods()
    roles = sorted(pod.metadata.labels["training.kubeflow.org/job-role"] for pod in pods)
    assert roles == ["launcher", "worker", "worker"]
    assert {pod.spec.scheduler_name for pod in pods} == {SCHEDULER}
    assert all(pod.spec.node_name is None and pod.status.phase == "Pending" for pod in pods)  # bound by us, later
    workers = sorted(
        pod.metadata.name for pod in pods if pod.metadata.labels["training.kubeflow.org/job-role"] == "worker"
    )
    assert workers == ["allreduce-worker-0", "allreduce-worker-1"]
