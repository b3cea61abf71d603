"""The manifests of examples/ applied to the test bed's API server as their READMEs say, and placed by railforge:
the queues are usable and pick up their namespaces' gangs, the DDP Job's two pods and the MPIJob's launcher and
workers are each bound whole, one worker per node, so the examples cannot rot."""

from conftest import ROOT, eventually, kubectl
from kubernetes import client

from railforge.testbed.controlplane import add_api_node

EXAMPLES = ROOT / "examples"
POOL_LABEL = "railforge.test/pool"
POOL = "examples"
NCCL_CLASS = "0123456789"
RAILS = {f"rdma/rail{rail}": "1" for rail in range(8)}


def test_examples_apply_and_railforge_places_them(control_plane, mpi_operator, run_scheduler):
    hostname = "kubernetes.io/hostname"
    nodes = [f"{POOL}-n{index}" for index in range(4)]
    for node in nodes:
        allocatable = {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi", **RAILS}
        labels = {POOL_LABEL: POOL, hostname: node, "railforge.io/nccl-class": NCCL_CLASS}
        add_api_node(control_plane, node, allocatable, labels=labels)
    core, custom = client.CoreV1Api(control_plane.api), client.CustomObjectsApi(control_plane.api)
    settings = {"scheduler_name": "railforge", "node_selector": f"{POOL_LABEL}={POOL}", "min_period_seconds": 0.05}
    run_scheduler({**settings, "resync_seconds": 2, "leader_election": {"enabled": False}})
    try:
        kubectl(control_plane, "apply", f"--filename={EXAMPLES / 'queues/queues.yml'}")
        kubectl(control_plane, "apply", f"--filename={EXAMPLES / 'pytorch-ddp/ddp.yml'}")
        # the MPIJob README's steps: the node class's NCCL ConfigMap copied into the job's namespace, CLASS filled in
        nccl = {"metadata": {"name": f"nccl-{NCCL_CLASS}"}, "data": {"NCCL_IB_HCA": "=mlx5_0,mlx5_1"}}
        core.create_namespaced_config_map("llm", nccl)
        job = control_plane.directory / "mpijob.yml"
        job.write_text((EXAMPLES / "mpijob-rails/mpijob.yml").read_text().replace("CLASS", NCCL_CLASS))
        kubectl(control_plane, "apply", f"--filename={job}")

        def placed() -> None:
            for name in ("team-vision", "team-llm", "research"):
                queue = custom.get_cluster_custom_object("railforge.io", "v1alpha1", "queues", name)
                assert queue["status"]["usable"] is True, queue
            ddp = {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod("vision").items}
            assert len(ddp) == 2 and all(ddp.values()) and len(set(ddp.values())) == 2, ddp
            mpi = {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod("llm").items}
            workers = [node for name, node in mpi.items() if "-worker-" in name]
            assert len(mpi) == 3 and all(mpi.values()), mpi
            assert len(set(workers)) == 2 and not set(workers) & set(ddp.values()), (workers, ddp)

        eventually(placed, timeout=60)
    finally:
        for namespace in ("vision", "llm"):
            core.delete_namespace(namespace)
        for name in ("team-vision", "team-llm", "research"):
            custom.delete_cluster_custom_object("railforge.io", "v1alpha1", "queues", name)
