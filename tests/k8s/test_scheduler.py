"""The railforge scheduler (railforge.k8s.Adapter) against the real API server, on API-only GPU nodes: what it
binds, what it refuses and how it tells users why, and that bad input never stops it."""

import importlib.util
import time
from pathlib import Path

from conftest import eventually

ROOT = Path(__file__).resolve().parents[2]


def hardware_labels(facts: dict) -> dict[str, str]:
    """Node labels exactly as the railforge_node_labels filter writes them from hardware facts."""
    spec = importlib.util.spec_from_file_location("railforge_hw", ROOT / "plugins/filter/railforge_hw.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.railforge_node_labels(facts)


DGX_H100_FACTS = {  # what railforge_hw_facts reports for a DGX H100: NVSwitch inside the node, no NVLink fabric
    "gpu_count": 8,
    "gpu_architectures": ["Hopper"],
    "rail_count": 8,
    "rdma_link_layers": ["InfiniBand"],
    "nvlink": {"present": True},
}


def test_a_gang_that_cannot_fit_binds_nothing_and_says_why(cluster, run_scheduler):
    cluster.add_nodes(2, gpus=8)
    run_scheduler(cluster.settings())
    pods = cluster.gang("big", 3, gpus=8)  # 24 GPUs; the pool has 16

    def told() -> None:
        group = cluster.group_object("big")
        reason = group["metadata"].get("annotations", {}).get("railforge.io/reason", "")
        assert reason.startswith("does not fit even with nothing running: needs 24 GPUs"), reason
        assert group["metadata"]["annotations"]["railforge.io/reason-code"] == "capacity.never-fits"
        assert group["status"]["phase"] == "Pending"
        assert any(e.startswith("Unschedulable: does not fit") for e in cluster.events("big"))
        for pod in pods:
            assert any(e.startswith("Unschedulable: does not fit") for e in cluster.events(pod))
        condition = next(
            c
            for c in cluster.core.read_namespaced_pod(pods[0], cluster.name).status.conditions
            if c.type == "PodScheduled"
        )
        assert (condition.status, condition.reason) == ("False", "Unschedulable")
        assert condition.message.startswith("does not fit even with nothing running")

    eventually(told)
    assert cluster.bound() == {}  # not one pod of it


def test_an_nvlink_domain_of_one_node_never_spans_two_nodes(cluster, run_scheduler):
    labels = {**hardware_labels(DGX_H100_FACTS), "railforge.io/spine": "s0", "railforge.io/leaf": "l0"}
    assert labels["railforge.io/nvlink-domain"] == "node"  # what the hardware facts write for a DGX
    nodes = cluster.add_nodes(2, gpus=8, labels=labels)
    run_scheduler(cluster.settings())
    required = {"railforge.io/topology-required": "nvlink"}
    cluster.gang("nvl16", 2, gpus=8, annotations=required)  # 16 GPUs inside one NVLink domain: impossible
    cluster.gang("nvl8", 1, gpus=8, annotations=required)  # one node's NVLink: fine

    def decided() -> None:
        assert set(cluster.bound("nvl8").values()) <= set(nodes) and cluster.bound("nvl8")
        reason = cluster.group_object("nvl16")["metadata"].get("annotations", {}).get("railforge.io/reason", "")
        assert "within one nvlink" in reason, reason

    eventually(decided)
    time.sleep(1)  # several passes later, still nothing of it bound
    assert cluster.bound("nvl16") == {}


def test_bad_input_is_named_and_never_stops_the_loop(cluster, run_scheduler):
    cluster.add_nodes(2, gpus=8)
    prefix = cluster.name
    cluster.queue(f"{prefix}-a", parentQueue=f"{prefix}-b")
    cluster.queue(f"{prefix}-b", parentQueue=f"{prefix}-a")
    cluster.queue(f"{prefix}-bad", resources={"nvidia.com/gpu": {"quota": "eight"}})
    run_scheduler(cluster.settings())
    queue_label = "railforge.io/queue"
    cluster.gang("lost", 1, labels={queue_label: "no-such-queue"})
    cluster.gang("cyclic", 1, labels={queue_label: f"{prefix}-a"})
    cluster.gang("malformed", 1, labels={queue_label: f"{prefix}-bad"})
    cluster.podgroup("short", 3)  # minMember 3, but only two pods come
    cluster.pod("short-0", 1, group="short")
    cluster.pod("short-1", 1, group="short")
    cluster.gang("runtime", 1, annotations={"railforge.io/runtime": "soon"})
    cluster.gang("good", 2, gpus=4)

    def reported() -> None:
        def reason(group: str) -> str:
            return cluster.group_object(group)["metadata"].get("annotations", {}).get("railforge.io/reason", "")

        assert (
            reason("lost")
            == "PodGroup label railforge.io/queue names queue 'no-such-queue', which does not exist or is not usable"
        )
        assert reason("cyclic").startswith(f"PodGroup label railforge.io/queue names queue '{prefix}-a'")
        assert reason("malformed").startswith(f"PodGroup label railforge.io/queue names queue '{prefix}-bad'")
        assert reason("short").startswith("spec.minMember is 3 but 2 pods carry scheduling.x-k8s.io/pod-group=short")
        assert (
            reason("runtime")
            == "annotation railforge.io/runtime is 'soon'; expected seconds (3600) or a duration such as 1h30m"
        )
        for group in ("lost", "short", "runtime"):
            assert any(e.startswith("InvalidSpec: ") for e in cluster.events(group)), group
        queues = {
            q["metadata"]["name"]: q
            for q in cluster.custom.list_cluster_custom_object("railforge.io", "v1alpha1", "queues")["items"]
        }
        cycle = f"{prefix}-a -> {prefix}-b -> {prefix}-a"
        assert queues[f"{prefix}-a"]["status"] == {
            "usable": False,
            "message": f"spec.parentQueue forms a cycle ({cycle}); expected a tree",
        }
        assert queues[f"{prefix}-bad"]["status"]["message"] == (
            "spec.resources.quota[nvidia.com/gpu]: 'eight' is not a quantity; expected a number with an optional "
            "suffix (500m, 16Gi, 1e3)"
        )
        assert len(cluster.bound("good")) == 2

    eventually(reported)
    assert set(cluster.bound()) == {"good-0", "good-1"}  # nothing else
    # a fix is picked up without a restart
    cluster.pod("short-2", 1, group="short")

    def completed() -> None:
        assert len(cluster.bound("short")) == 3

    eventually(completed)
