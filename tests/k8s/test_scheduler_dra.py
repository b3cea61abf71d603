"""DRA claims on the real API server: a gang whose pods claim, from a ResourceClaimTemplate, two GPUs and the rail NIC
on their PCIe root, placed where the claims fit and allocated before binding; a claim two pods share, allocated once;
a gang whose claim no node can satisfy waits naming the claim and the shortfall, never bound; and the devices come
back through Kubernetes' own resource-claim controller once the pods are gone. Devices are the DGX-shaped stand-in's
(railforge.testbed.draslices) on API-only nodes."""

import contextlib

from conftest import eventually
from kubernetes.client import ApiException

from railforge.testbed import draslices

RESOURCE = ("resource.k8s.io", "v1")
PAIR = {
    "devices": {
        "requests": [
            {"name": "gpu", "exactly": {"deviceClassName": draslices.GPU_DRIVER, "count": 2}},
            {"name": "nic", "exactly": {"deviceClassName": draslices.RAIL_DRIVER}},
        ],
        "constraints": [{"requests": ["gpu", "nic"], "matchAttribute": draslices.PCIE_ROOT}],
    }
}


def gpus(count: int) -> dict:
    return {"name": "gpu", "exactly": {"deviceClassName": draslices.GPU_DRIVER, "count": count}}


def publish(cluster, nodes: list[str]) -> None:
    for body in draslices.device_classes():  # cluster-scoped, shared by the tests on the plane
        with contextlib.suppress(ApiException):
            cluster.custom.create_cluster_custom_object(*RESOURCE, "deviceclasses", body)
    for node in nodes:
        for body in draslices.node_slice(node):
            cluster.custom.create_cluster_custom_object(*RESOURCE, "resourceslices", body)


def pcie_root(device: str) -> int:
    """The stand-in's layout: gpu-2k, gpu-2k+1 and rail-k share PCIe root k."""
    kind, index = device.split("-")
    return int(index) // 2 if kind == "gpu" else int(index)


def claims(cluster) -> dict[str, dict]:
    items = cluster.custom.list_namespaced_custom_object(*RESOURCE, cluster.name, "resourceclaims")["items"]
    return {item["metadata"]["name"]: item for item in items}


def reason(cluster, group: str) -> str:
    return (cluster.group_object(group)["metadata"].get("annotations") or {}).get("railforge.io/reason", "")


def test_claims_are_allocated_with_the_gang_and_come_back_when_it_ends(cluster, run_scheduler):
    nodes = cluster.add_nodes(2, gpus=8)
    publish(cluster, nodes)
    template = {"apiVersion": "/".join(RESOURCE), "kind": "ResourceClaimTemplate", "metadata": {"name": "pair"}}
    template["spec"] = {"spec": PAIR}
    cluster.custom.create_namespaced_custom_object(*RESOURCE, cluster.name, "resourceclaimtemplates", template)
    shared = {"apiVersion": "/".join(RESOURCE), "kind": "ResourceClaim", "metadata": {"name": "channel"}}
    shared["spec"] = {"devices": {"requests": [gpus(1)]}}
    cluster.custom.create_namespaced_custom_object(*RESOURCE, cluster.name, "resourceclaims", shared)
    adapter = run_scheduler(cluster.settings())
    # five pods of two GPUs and their NIC: four fit a node (four roots), so the gang spans both nodes
    cluster.podgroup("train", 5)
    for i in range(5):
        cluster.pod(
            f"train-{i}", 0, group="train", resourceClaims=[{"name": "pair", "resourceClaimTemplateName": "pair"}]
        )
    cluster.podgroup("mpi", 2)
    for i in range(2):
        cluster.pod(f"mpi-{i}", 0, group="mpi", resourceClaims=[{"name": "ch", "resourceClaimName": "channel"}])
    cluster.wait("both gangs bound", lambda: len(cluster.bound()) == 7, timeout=60)
    bound = cluster.bound()
    pods = {pod.metadata.name: pod for pod in cluster.pods()}
    found = claims(cluster)
    for i in range(5):
        name = f"train-{i}"
        (entry,) = pods[name].status.resource_claim_statuses
        claim = found[entry.resource_claim_name]
        status = claim["status"]
        assert [ref["uid"] for ref in status["reservedFor"]] == [pods[name].metadata.uid]
        terms = status["allocation"]["nodeSelector"]["nodeSelectorTerms"]
        assert terms[0]["matchFields"][0]["values"] == [bound[name]]
        results = status["allocation"]["devices"]["results"]
        assert sorted(r["request"] for r in results) == ["gpu", "gpu", "nic"]
        assert {r["pool"] for r in results} == {bound[name]}  # the node's own devices
        assert len({pcie_root(r["device"]) for r in results}) == 1, results
        assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
    channel = found["channel"]["status"]
    assert sorted(ref["name"] for ref in channel["reservedFor"]) == ["mpi-0", "mpi-1"]
    assert len(channel["allocation"]["devices"]["results"]) == 1 and bound["mpi-0"] == bound["mpi-1"]
    # four PCIe roots a node; the shared claim's GPU breaks one of them on its node
    per_node = [sorted(bound[f"train-{i}"] for i in range(5)).count(node) for node in nodes]
    assert per_node[nodes.index(bound["mpi-0"])] <= 3 and max(per_node) <= 4, per_node
    # nine GPUs in one claim: no node has them; the gang waits naming the claim, never bound
    big = {"apiVersion": "/".join(RESOURCE), "kind": "ResourceClaim", "metadata": {"name": "nine"}}
    big["spec"] = {"devices": {"requests": [gpus(9)]}}
    cluster.custom.create_namespaced_custom_object(*RESOURCE, cluster.name, "resourceclaims", big)
    cluster.podgroup("big", 1)
    cluster.pod("big-0", 0, group="big", resourceClaims=[{"name": "gpus", "resourceClaimName": "nine"}])

    def says_why() -> None:
        words = reason(cluster, "big")
        assert f"ResourceClaim {cluster.name}/nine" in words and "request gpu needs 9 device(s)" in words, words

    eventually(says_why)
    assert "big-0" not in cluster.bound()
    # while it waits its claim has the delete protection already, so its bind will write only the allocation
    nine = claims(cluster)["nine"]
    assert nine["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert not (nine.get("status") or {}).get("allocation")
    # the first gang ends: Kubernetes' resource-claim controller releases its claims, and a gang of a whole node's
    # GPUs on each node fits in their place
    for i in range(5):
        cluster.core.delete_namespaced_pod(f"train-{i}", cluster.name, grace_period_seconds=0)
    whole = {"apiVersion": "/".join(RESOURCE), "kind": "ResourceClaimTemplate", "metadata": {"name": "node"}}
    whole["spec"] = {"spec": {"devices": {"requests": [gpus(7)]}}}
    cluster.custom.create_namespaced_custom_object(*RESOURCE, cluster.name, "resourceclaimtemplates", whole)
    cluster.podgroup("full", 2)
    for i in range(2):
        cluster.pod(
            f"full-{i}", 0, group="full", resourceClaims=[{"name": "gpus", "resourceClaimTemplateName": "node"}]
        )
    cluster.wait("the gang of whole nodes bound", lambda: len(cluster.bound("full")) == 2, timeout=60)
    assert len(set(cluster.bound("full").values())) == 2
    assert "claim_errors" not in adapter.state.view().counters


def test_a_claim_an_interrupted_pass_allocated_is_released_then_allocated_where_the_gang_goes(cluster, run_scheduler):
    """A claim left allocated and reserved for an unbound pod, as a scheduler stopped between its writes and its
    binds leaves it: cleared first (an allocation cannot be changed), then allocated anew where the pod is bound."""
    nodes = cluster.add_nodes(2, gpus=8)
    publish(cluster, nodes)
    pod = cluster.pod("job-0", 0, resourceClaims=[{"name": "gpus", "resourceClaimName": "four"}])
    four = {"apiVersion": "/".join(RESOURCE), "kind": "ResourceClaim", "metadata": {"name": "four"}}
    four["spec"] = {"devices": {"requests": [gpus(4)]}}
    created = cluster.custom.create_namespaced_custom_object(*RESOURCE, cluster.name, "resourceclaims", four)
    results = [
        {"request": "gpu", "driver": draslices.GPU_DRIVER, "pool": nodes[0], "device": f"gpu-{i}"} for i in range(4)
    ]
    terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [nodes[0]]}]}]
    created["status"] = {
        "allocation": {"devices": {"results": results}, "nodeSelector": {"nodeSelectorTerms": terms}},
        "reservedFor": [{"resource": "pods", "name": "job-0", "uid": pod["metadata"]["uid"]}],
    }
    cluster.custom.replace_namespaced_custom_object_status(*RESOURCE, cluster.name, "resourceclaims", "four", created)
    adapter = run_scheduler(cluster.settings())
    cluster.wait("the pod bound", lambda: "job-0" in cluster.bound(), timeout=60)
    status = cluster.custom.get_namespaced_custom_object(*RESOURCE, cluster.name, "resourceclaims", "four")["status"]
    node = cluster.bound()["job-0"]
    assert status["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [node]
    assert [ref["uid"] for ref in status["reservedFor"]] == [pod["metadata"]["uid"]]
    assert any(d.kind == "release-claim" for d in adapter.state.view().recent), adapter.state.view().recent
