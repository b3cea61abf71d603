"""DRA claims: devices read from ResourceSlices, selectors in CEL, constraints, a gang's claims allocated on the
nodes it is placed on, and what is refused or waited for. The slices are the test bed's DGX-shaped stand-in."""

import pytest
from test_k8s_translate import SETTINGS, node, podgroup

from railforge.k8s import dra
from railforge.k8s.gangapis import SCHEDULER_PLUGINS
from railforge.k8s.translate import translate
from railforge.scheduler import Scheduler, Snapshot
from railforge.testbed import draslices

SLICES = [s for name in ("n1", "n2") for s in draslices.node_slice(name)]
CLASSES = draslices.device_classes()


def claim(name: str, requests: list[dict], constraints=(), namespace: str = "ml", status: dict | None = None) -> dict:
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-claim-{name}", "resourceVersion": "1"},
        "spec": {"devices": {"requests": requests, "constraints": list(constraints)}},
        "status": status or {},
    }


def exactly(name: str, device_class: str, count: int = 1, *expressions: str) -> dict:
    selectors = [{"cel": {"expression": e}} for e in expressions]
    return {"name": name, "exactly": {"deviceClassName": device_class, "count": count, "selectors": selectors}}


PAIR = [exactly("gpu", draslices.GPU_DRIVER, 2), exactly("nic", draslices.RAIL_DRIVER)]
SAME_ROOT = [{"requests": ["gpu", "nic"], "matchAttribute": draslices.PCIE_ROOT}]


def devices(*claims: dict) -> dra.Devices:
    return dra.Devices(SLICES, claims, CLASSES)


def read(obj: dict) -> dra.Claim:
    result = devices(obj).claim(obj["metadata"]["namespace"], obj["metadata"]["name"])
    assert result is not None
    return result


def test_a_gpu_and_the_nic_on_its_pcie_root_are_allocated_together():
    found = devices()
    pair = read(claim("pair", PAIR, SAME_ROOT))
    on_node = found.reachable("n1")
    taken: set = set()
    roots = []
    for _ in range(4):  # four roots of two GPUs and one NIC each
        chosen = dra.allocate(pair, on_node, taken)
        assert chosen is not None
        picked = [d for ds in chosen.values() for d in ds]
        assert len({d.attributes[draslices.PCIE_ROOT] for d in picked}) == 1
        roots.append(picked[0].attributes[draslices.PCIE_ROOT])
        taken |= {d.key for d in picked}
    assert len(set(roots)) == 4
    assert dra.allocate(pair, on_node, taken) is None
    assert "request gpu needs 2 device(s) of class gpu.nvidia.com matching its selectors, 0 free" in dra.shortfall(
        pair, on_node, taken
    )
    # without the constraint, a fifth pair is still short: every NIC is taken
    assert dra.node_slots([read(claim("loose", PAIR))], on_node, set(), 8) == 4


def test_selectors_of_the_class_and_the_request_both_apply():
    model = f'device.attributes["{draslices.GPU_DRIVER}"].productName.startsWith("NVIDIA H100")'
    numa = f'device.attributes["{draslices.GPU_DRIVER}"].numaNode == 1'
    found = devices()
    chosen = dra.allocate(
        read(claim("h100", [exactly("gpu", draslices.GPU_DRIVER, 4, model, numa)])), found.reachable("n2"), set()
    )
    assert chosen is not None
    assert sorted(d.name for d in chosen["gpu"]) == ["gpu-4", "gpu-5", "gpu-6", "gpu-7"]
    assert {d.node for d in chosen["gpu"]} == {"n2"}
    only = 'device.attributes["gpu.nvidia.com"].productName == "B200"'
    b200 = read(claim("b200", [exactly("gpu", draslices.GPU_DRIVER, 1, only)]))
    assert dra.allocate(b200, found.reachable("n1"), set()) is None


@pytest.mark.parametrize(
    ("request_", "code", "words"),
    [
        ({"name": "r", "firstAvailable": []}, "input.invalid", "requests[0] has neither exactly nor firstAvailable"),
        (
            {"name": "r", "exactly": {"deviceClassName": draslices.GPU_DRIVER, "allocationMode": "Most"}},
            "input.invalid",
            "allocationMode is Most; expected ExactCount or All",
        ),
        (
            {"name": "r", "exactly": {"deviceClassName": draslices.GPU_DRIVER, "adminAccess": True}},
            "input.unsupported",
            "exactly.adminAccess is set",
        ),
        (exactly("r", "nope"), "dra.class-missing", "names DeviceClass 'nope', which does not exist"),
        (exactly("r", draslices.GPU_DRIVER, 1, "device.driver =="), "input.invalid", "is not CEL"),
        (
            exactly(
                "r", draslices.GPU_DRIVER, 1, 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("1Gi")) > 0'
            ),
            "input.unsupported",
            "uses quantity(), which this scheduler's CEL does not provide",
        ),
    ],
)
def test_what_the_covered_subset_lacks_is_refused_naming_the_field(request_, code, words):
    with pytest.raises(dra.ClaimError) as raised:
        read(claim("c", [request_]))
    assert raised.value.code == code
    assert "ResourceClaim ml/c" in str(raised.value) or "DeviceClass" in str(raised.value)
    assert words in str(raised.value)


def test_all_takes_every_matching_device_of_the_node_and_distinct_keeps_values_apart():
    found = devices()
    every = {"name": "gpus", "exactly": {"deviceClassName": draslices.GPU_DRIVER, "allocationMode": "All"}}
    whole = read(claim("whole", [every]))
    chosen = dra.allocate(whole, found.reachable("n1"), set())
    assert chosen is not None and len(chosen["gpus"]) == 8
    one_held = {(draslices.GPU_DRIVER, "n1", "gpu-3")}
    assert dra.allocate(whole, found.reachable("n1"), one_held) is None
    assert "needs every device of class gpu.nvidia.com matching its selectors (8), 7 free" in dra.shortfall(
        whole, found.reachable("n1"), one_held
    )
    # four GPUs on four different PCIe roots: one of each pair
    spread = read(
        claim("spread", [exactly("gpu", draslices.GPU_DRIVER, 4)], [{"distinctAttribute": draslices.PCIE_ROOT}])
    )
    chosen = dra.allocate(spread, found.reachable("n1"), set())
    assert chosen is not None
    assert len({d.attributes[draslices.PCIE_ROOT] for d in chosen["gpu"]}) == 4
    assert (
        dra.allocate(
            read(
                claim("five", [exactly("gpu", draslices.GPU_DRIVER, 5)], [{"distinctAttribute": draslices.PCIE_ROOT}])
            ),
            found.reachable("n1"),
            set(),
        )
        is None
    )


def test_first_available_takes_the_first_alternative_that_fits_and_constraints_name_its_request():
    b200 = 'device.attributes["gpu.nvidia.com"].productName == "B200"'
    alternatives = [
        {
            "name": "b200",
            "deviceClassName": draslices.GPU_DRIVER,
            "count": 2,
            "selectors": [{"cel": {"expression": b200}}],
        },
        {"name": "any", "deviceClassName": draslices.GPU_DRIVER, "count": 2},
    ]
    requests = [{"name": "gpu", "firstAvailable": alternatives}, exactly("nic", draslices.RAIL_DRIVER)]
    found = devices()
    prioritized = read(claim("prio", requests, SAME_ROOT))
    chosen = dra.allocate(prioritized, found.reachable("n1"), set())
    assert chosen is not None and set(chosen) == {"gpu/any", "nic"}
    assert len({d.attributes[draslices.PCIE_ROOT] for ds in chosen.values() for d in ds}) == 1
    results = dra.allocation_status(prioritized, chosen, "n1", [])["allocation"]["devices"]["results"]
    assert sorted(r["request"] for r in results) == ["gpu/any", "gpu/any", "nic"]


def test_the_allocation_carries_the_class_and_claim_configuration_for_the_driver():
    opaque = {
        "driver": draslices.GPU_DRIVER,
        "parameters": {"kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}},
    }
    classes = [
        dict(c, spec={**c["spec"], "config": [{"opaque": {"driver": "x", "parameters": {"a": 1}}}]})
        if c["metadata"]["name"] == draslices.GPU_DRIVER
        else c
        for c in CLASSES
    ]
    obj = claim("shared-gpu", [exactly("gpu", draslices.GPU_DRIVER)])
    obj["spec"]["devices"]["config"] = [{"requests": ["gpu"], "opaque": opaque}]
    found = dra.Devices(SLICES, [obj], classes)
    read_back = found.claim("ml", "shared-gpu")
    assert read_back is not None
    chosen = dra.allocate(read_back, found.reachable("n1"), set())
    status = dra.allocation_status(read_back, chosen, "n1", [])
    assert status["allocation"]["devices"]["config"] == [
        {"source": "FromClass", "requests": ["gpu"], "opaque": {"driver": "x", "parameters": {"a": 1}}},
        {"source": "FromClaim", "requests": ["gpu"], "opaque": opaque},
    ]


def test_a_selector_that_fails_on_a_device_fails_the_claim_with_the_error():
    found = devices()
    missing = read(
        claim("m", [exactly("r", draslices.GPU_DRIVER, 1, 'device.attributes["gpu.nvidia.com"].memory > 1')])
    )
    with pytest.raises(dra.ClaimError) as raised:
        dra.allocate(missing, found.reachable("n1"), set())
    assert raised.value.code == "dra.selector-error" and "fails on device gpu-0" in str(raised.value)


def claimed_pod(name: str, claims: dict[str, str], group: str = "job", **status) -> dict:
    """A pod of gang ``group`` whose spec.resourceClaims name claims (entry -> claim, or None: from a template)."""
    member = {
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-11-23T20:00:00Z",
            "labels": {"scheduling.x-k8s.io/pod-group": group},
        },
        "spec": {"schedulerName": "railforge", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending", **status},
    }
    member["spec"]["resourceClaims"] = [
        {"name": entry, **({"resourceClaimName": value} if value else {"resourceClaimTemplateName": "t"})}
        for entry, value in claims.items()
    ]
    return member


def translated(pods, claims, groups=None):
    groups = groups or (podgroup("job", 2),)
    by_key = {(SCHEDULER_PLUGINS, "ml", g["metadata"]["name"]): g for g in groups}
    found = dra.Devices(SLICES, claims, CLASSES)
    nodes = [node(name, labels={"kubernetes.io/hostname": name}) for name in ("n1", "n2")]
    return translate(nodes, pods, [], by_key, [], {}, SETTINGS, now=1e9, devices=found)


def test_a_gang_of_claimed_pods_is_placed_where_every_pod_claims_fit_and_allocated_there():
    # five pods each claiming 2 GPUs + the NIC on their root: four fit a node, so the gang spans both
    claims = [claim(f"c{i}", PAIR, SAME_ROOT) for i in range(5)]
    pods = [claimed_pod(f"job-{i}", {"pair": f"c{i}"}) for i in range(5)]
    out = translated(pods, claims, (podgroup("job", 5),))
    assert out.waiting == {}
    slots = out.claim_slots
    (slot,) = {need for need in out.pending[0].members[0].requests if need.startswith("claims/")}
    assert {node: room[slot] for node, room in slots.items()} == {"n1": 4, "n2": 4}
    assert {node: room["devices/gpu.nvidia.com"] for node, room in slots.items()} == {"n1": 8, "n2": 8}
    decisions = Scheduler().decide(
        Snapshot(now=1e9, nodes=tuple(out.nodes), queues=tuple(out.queues), pending=tuple(out.pending), running=())
    )
    (bind,) = decisions.binds
    assert sorted(bind.placement.values()).count("n1") in (1, 4)
    taken: set = set()
    statuses, why = dra.allocate_gang(
        out.devices, out.claims["ml/job"], {p["metadata"]["name"]: p for p in pods}, bind.placement, taken
    )
    assert why is None and len(statuses) == 5 and len(taken) == 15
    for written, status in statuses:
        pod_name = next(p for p, cs in out.claims["ml/job"].by_pod.items() if cs[0].name == written.name)
        node_name = bind.placement[pod_name]
        selector = status["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]
        assert selector == {"key": "metadata.name", "operator": "In", "values": [node_name]}
        assert status["reservedFor"] == [{"resource": "pods", "name": pod_name, "uid": f"uid-{pod_name}"}]
        results = status["allocation"]["devices"]["results"]
        assert sorted(r["request"] for r in results) == ["gpu", "gpu", "nic"]
    # the same placement again finds those devices taken
    assert (
        dra.allocate_gang(
            out.devices, out.claims["ml/job"], {p["metadata"]["name"]: p for p in pods}, bind.placement, taken
        )[1]
        is not None
    )


def test_a_claim_several_pods_share_is_allocated_once_and_reserved_for_each():
    shared = claim("channel", [exactly("gpu", draslices.GPU_DRIVER, 1)])
    pods = [claimed_pod(f"job-{i}", {"ch": "channel"}) for i in range(2)]
    out = translated(pods, [shared])
    assert out.claim_slots == {}  # a shared claim is no pod's own room
    # of node-local devices: the pods sharing it go to one node
    ((gang,),) = [out.pending]
    assert gang.together is not None and gang.together.topology_key == "kubernetes.io/hostname"
    assert "ResourceClaim ml/channel, shared by several pods" in gang.together.source
    gang_claims = out.claims["ml/job"]
    assert gang_claims.shared == {("ml", "channel")}
    statuses, why = dra.allocate_gang(
        out.devices, gang_claims, {p["metadata"]["name"]: p for p in pods}, {"job-0": "n1", "job-1": "n1"}, set()
    )
    assert why is None
    ((_, status),) = statuses
    assert [ref["name"] for ref in status["reservedFor"]] == ["job-0", "job-1"]
    assert len(status["allocation"]["devices"]["results"]) == 1
    # node-local devices: a pod on another node cannot use it
    _, why = dra.allocate_gang(
        out.devices, gang_claims, {p["metadata"]["name"]: p for p in pods}, {"job-0": "n1", "job-1": "n2"}, set()
    )
    assert "ResourceClaim ml/channel shared across nodes, of devices all reach: request gpu needs 1" in why


def test_claims_not_made_yet_or_unallocatable_keep_the_gang_waiting_with_the_claim_and_shortfall():
    waiting = translated([claimed_pod("job-0", {"gpus": None}), claimed_pod("job-1", {"gpus": None})], [])
    assert waiting.waiting["ml/job"].code == "dra.claim-pending"
    assert "waits for the ResourceClaim of its spec.resourceClaims entry gpus" in waiting.waiting["ml/job"]
    assert waiting.pending == [] and not waiting.problems
    nine = claim("nine", [exactly("gpu", draslices.GPU_DRIVER, 9)])
    pods = [claimed_pod("job-0", {"gpus": "nine"}), claimed_pod("job-1", {"gpus": "x"}, status={})]
    out = translated(pods[:1], [nine], groups=(podgroup("job", 1),))
    why = out.waiting["ml/job"]
    assert why.code == "dra.unallocatable" and out.pending == []
    assert "ResourceClaim ml/nine" in why and "request gpu needs 9 device(s) of class gpu.nvidia.com" in why
    assert "8 free" in why


def allocated_on(node: str, count: int) -> dict:
    results = [
        {"request": "gpu", "driver": draslices.GPU_DRIVER, "pool": node, "device": f"gpu-{i}"} for i in range(count)
    ]
    return {"devices": {"results": results}}


def test_devices_other_claims_hold_are_not_given_and_a_stale_own_allocation_is_released_first():
    theirs = [{"resource": "pods", "name": "other", "uid": "uid-other"}]
    held = claim(
        "theirs",
        [exactly("gpu", draslices.GPU_DRIVER, 8)],
        status={"allocation": allocated_on("n1", 8), "reservedFor": theirs},
    )
    pods = [claimed_pod("job-0", {"gpus": "mine"})]
    fresh = claim("mine", [exactly("gpu", draslices.GPU_DRIVER, 8)])
    out = translated(pods, [held, fresh], groups=(podgroup("job", 1),))
    (gang,) = out.pending
    (slot,) = [need for need in gang.members[0].requests if need.startswith("claims/")]
    assert {node: room[slot] for node, room in out.claim_slots.items()} == {"n1": 0, "n2": 1}
    assert gang.members[0].requests["devices/gpu.nvidia.com"] == 8
    assert out.claim_slots["n1"]["devices/gpu.nvidia.com"] == 0
    # allocated for job-0 by a pass that never bound it: an allocation cannot be changed, so it is released first
    mine = dict(
        fresh,
        status={
            "allocation": allocated_on("n2", 8),
            "reservedFor": [{"resource": "pods", "name": "job-0", "uid": "uid-job-0"}],
        },
    )
    out = translated(pods, [held, mine], groups=(podgroup("job", 1),))
    assert out.waiting["ml/job"].code == "dra.releasing" and [c.name for c in out.releasing] == ["mine"]
    assert out.pending == []


def test_pods_asking_different_counts_of_a_class_are_not_both_given_the_same_devices():
    # n1 has 8 free GPUs, n2 only 2: the 8-GPU pod must take n1, the 2-GPU pod n2
    held = claim(
        "theirs",
        [exactly("gpu", draslices.GPU_DRIVER, 6)],
        status={
            "allocation": allocated_on("n2", 6),
            "reservedFor": [{"resource": "pods", "name": "o", "uid": "uid-o"}],
        },
    )
    claims = [
        held,
        claim("two", [exactly("gpu", draslices.GPU_DRIVER, 2)]),
        claim("eight", [exactly("gpu", draslices.GPU_DRIVER, 8)]),
    ]
    pods = [claimed_pod("job-a", {"gpus": "two"}), claimed_pod("job-b", {"gpus": "eight"})]
    out = translated(pods, claims)
    decisions = Scheduler().decide(
        Snapshot(now=1e9, nodes=tuple(out.nodes), queues=tuple(out.queues), pending=tuple(out.pending), running=())
    )
    (bind,) = decisions.binds
    assert bind.placement == {"job-a": "n2", "job-b": "n1"}
    statuses, why = dra.allocate_gang(
        out.devices,
        out.claims["ml/job"],
        {p["metadata"]["name"]: p for p in pods},
        bind.placement,
        set(out.devices.allocated),
    )
    assert why is None and len(statuses) == 2


def test_a_claim_pods_on_several_nodes_share_is_allocated_from_devices_every_node_reaches():
    channel_slice = {
        "metadata": {"name": "channels", "resourceVersion": "7"},
        "spec": {
            "driver": "compute-domain.nvidia.com",
            "allNodes": True,
            "pool": {"name": "domain", "generation": 1},
            "devices": [{"name": f"channel-{i}", "attributes": {"id": {"int": i}}} for i in range(2)],
        },
    }
    channel_class = {
        "metadata": {"name": "channels"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "compute-domain.nvidia.com"'}}]},
    }
    # node-local GPUs match the shared claim's class too: the allocation must still take a channel
    everything = {"metadata": {"name": "anything"}, "spec": {}}
    shared = claim("channel", [exactly("ch", "anything")])
    pods = [claimed_pod(f"job-{i}", {"ch": "channel"}) for i in range(2)]
    found = dra.Devices([*SLICES, channel_slice], [shared], [*CLASSES, channel_class, everything])
    by_key = {(SCHEDULER_PLUGINS, "ml", "job"): podgroup("job", 2)}
    nodes = [node(name, labels={"kubernetes.io/hostname": name}) for name in ("n1", "n2")]
    out = translate(nodes, pods, [], by_key, [], {}, SETTINGS, now=1e9, devices=found)
    (gang,) = out.pending
    assert gang.together is None  # devices every node reaches can serve it: the pods may go apart
    statuses, why = dra.allocate_gang(
        found, out.claims["ml/job"], {p["metadata"]["name"]: p for p in pods}, {"job-0": "n1", "job-1": "n2"}, set()
    )
    assert why is None
    ((_, status),) = statuses
    assert [r["device"] for r in status["allocation"]["devices"]["results"]] == ["channel-0"]
    assert "nodeSelector" not in status["allocation"] and len(status["reservedFor"]) == 2


def test_a_waiting_gangs_claims_get_the_delete_protection_ahead_and_one_being_deleted_keeps_it_waiting():
    one = [exactly("gpu", draslices.GPU_DRIVER)]
    protected = claim("kept", one)
    protected["metadata"]["finalizers"] = [dra.DELETE_PROTECTION]
    deleting = claim("gone", one)
    deleting["metadata"]["deletionTimestamp"] = "2026-11-23T20:00:00Z"
    held = claim("held", one, status={"allocation": allocated_on("n1", 1)})
    claims = [claim("a", one), claim("b", one), protected, deleting, held]
    # two of three pods so far: the gang waits for the third, and its claims without the protection get it meanwhile
    pods = [claimed_pod("job-0", {"x": "a", "y": "kept"}), claimed_pod("job-1", {"x": "b", "y": "a", "z": "held"})]
    out = translated(pods, claims, (podgroup("job", 3),))
    assert out.waiting["ml/job"].code == "input.min-member"
    assert sorted(out.protecting) == [("ml", "a"), ("ml", "b")]  # a, which both pods use, once
    assert [obj["metadata"]["name"] for obj in out.protecting.values()] == [name for _, name in out.protecting]
    # a claim being deleted is neither protected nor allocated: the gang waits naming it
    out = translated([claimed_pod("job-0", {"x": "gone"})], claims, (podgroup("job", 1),))
    assert out.protecting == {} and out.pending == []
    why = out.waiting["ml/job"]
    assert why.code == "dra.claim-pending" and "uses ResourceClaim ml/gone, which is being deleted" in why
