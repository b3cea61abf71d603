"""The manifests of examples/ applied to the test bed's API server as their READMEs say, and placed by railforge:
the queues are usable and pick up their namespaces' gangs, the DDP Job's two pods and the MPIJob's launcher and
workers are each bound whole, one worker per node, and the DRA pairs' eight workers bound with their claims
allocated (on the DGX-shaped DRA stand-in's devices), so the examples cannot rot."""

from conftest import ROOT, eventually, kubectl
from kubernetes import client

from railforge.testbed import draslices
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
    resource = ("resource.k8s.io", "v1")
    for body in draslices.device_classes():
        if not custom.list_cluster_custom_object(
            *resource, "deviceclasses", field_selector=f"metadata.name={body['metadata']['name']}"
        )["items"]:
            custom.create_cluster_custom_object(*resource, "deviceclasses", body)
    slices = [body for node in nodes for body in draslices.node_slice(node)]
    for body in slices:
        custom.create_cluster_custom_object(*resource, "resourceslices", body)
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
        kubectl(control_plane, "apply", f"--filename={EXAMPLES / 'dra-pairs/pairs.yml'}")

        def placed() -> None:
            for name in ("team-vision", "team-llm", "research"):
                queue = custom.get_cluster_custom_object("railforge.io", "v1alpha1", "queues", name)
                assert queue["status"]["usable"] is True, queue
            vision = core.list_namespaced_pod("vision").items
            ddp = {p.metadata.name: p.spec.node_name for p in vision if p.metadata.name.startswith("ddp-")}
            assert len(ddp) == 2 and all(ddp.values()) and len(set(ddp.values())) == 2, ddp
            mpi = {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod("llm").items}
            workers = [node for name, node in mpi.items() if "-worker-" in name]
            assert len(mpi) == 3 and all(mpi.values()), mpi
            assert len(set(workers)) == 2 and not set(workers) & set(ddp.values()), (workers, ddp)
            pairs = [p for p in vision if p.metadata.name.startswith("pairs-")]
            assert len(pairs) == 8 and all(p.spec.node_name for p in pairs), [p.metadata.name for p in pairs]
            claims = custom.list_namespaced_custom_object(*resource, "vision", "resourceclaims")["items"]
            assert len(claims) == 8 and all(c["status"]["allocation"] for c in claims)

        eventually(placed, timeout=60)
    finally:
        for namespace in ("vision", "llm"):
            core.delete_namespace(namespace)
        for body in slices:
            custom.delete_cluster_custom_object(*resource, "resourceslices", body["metadata"]["name"])
        for name in ("team-vision", "team-llm", "research"):
            custom.delete_cluster_custom_object("railforge.io", "v1alpha1", "queues", name)
