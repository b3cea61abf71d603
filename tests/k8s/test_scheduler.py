"""The railforge scheduler (railforge.k8s.Adapter) against the real API server, on API-only GPU nodes: what it
binds, what it refuses and how it tells users why, and that bad input never stops it."""

import importlib.util
import json
import time
from pathlib import Path

from conftest import borrowers_bound, eventually, reserved_in
from k8s_helpers import end_member

from railforge.k8s.annotations import EXPECTED_START, decode_expected_start

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

PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


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
        assert any(e.startswith("FailedScheduling: does not fit") for e in cluster.events("big"))
        for pod in pods:
            assert any(e.startswith("FailedScheduling: does not fit") for e in cluster.events(pod))
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
        assert reason("short").startswith(
            "spec.minMember is 3 but fewer pods carry scheduling.x-k8s.io/pod-group=short"
        )
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


def test_pods_pinned_by_hostname_start_whole_each_on_its_own_node(cluster, run_scheduler):
    """A perftest pair's shape: one PodGroup, each pod pinned by nodeSelector kubernetes.io/hostname (whose value
    need not be the node's name). A gang pinning some pods and not others is refused, naming them."""
    hostname = "kubernetes.io/hostname"
    (node_a,) = cluster.add_nodes(1, gpus=8, labels={hostname: f"{cluster.name}-host-a"}, prefix="a")
    (node_b,) = cluster.add_nodes(1, gpus=8, labels={hostname: f"{cluster.name}-host-b"}, prefix="b")
    cluster.add_nodes(1, gpus=8, prefix="c")  # where best fit could as well put both 1-GPU pods
    run_scheduler(cluster.settings())
    cluster.podgroup("pair", 2)
    cluster.pod("pair-server", 1, group="pair", nodeSelector={hostname: f"{cluster.name}-host-b"})
    cluster.pod("pair-client", 1, group="pair", nodeSelector={hostname: f"{cluster.name}-host-a"})
    cluster.podgroup("mixed", 2)
    cluster.pod("mixed-0", 1, group="mixed", nodeSelector={hostname: f"{cluster.name}-host-a"})
    cluster.pod("mixed-1", 1, group="mixed")
    cluster.podgroup("full", 2)  # 9 GPUs pinned to node b, which has 8 (one taken by pair-server)
    cluster.pod("full-0", 8, group="full", nodeSelector={hostname: f"{cluster.name}-host-b"})
    cluster.pod("full-1", 1, group="full", nodeSelector={hostname: f"{cluster.name}-host-b"})

    def decided() -> None:
        def reason(group: str) -> str:
            return cluster.group_object(group)["metadata"].get("annotations", {}).get("railforge.io/reason", "")

        assert cluster.bound("pair") == {"pair-server": node_b, "pair-client": node_a}
        assert reason("mixed") == (
            "pods ['mixed-0'] set nodeSelector kubernetes.io/hostname and ['mixed-1'] do not; expected every pod "
            "of a gang pinned to its node, or none"
        )
        assert reason("full") == (
            f"does not fit even with nothing running: member full-0 is pinned to node {node_b}, which has 8 GPUs "
            "allocatable; its members there need 9 GPUs"
        )

    eventually(decided)
    assert cluster.bound("mixed") == {} and cluster.bound("full") == {}


def test_workers_that_must_spread_land_on_distinct_nodes_or_wait_saying_why(cluster, run_scheduler):
    """An MPIJob's workers carry a required podAntiAffinity on kubernetes.io/hostname naming each other: never two
    on one node, though best fit would pack three 1-GPU pods onto one; four of them on three nodes wait, told why.
    On a wider key (zone; h0 and h1 in z0, h2 in z1) two such workers take one zone each, and four workers spread
    over the zones with a skew of one land two to a zone; three whose podAffinity names each other on the zone share
    one. Two lone pods that avoid each other, pending at once, end on two nodes too."""
    hostname = "kubernetes.io/hostname"
    nodes = [
        cluster.add_nodes(1, gpus=8, labels={hostname: f"{cluster.name}-h{i}", "zone": f"z{i // 2}"}, prefix=f"h{i}")[0]
        for i in range(3)
    ]
    zone_of = {node: f"z{i // 2}" for i, node in enumerate(nodes)}
    run_scheduler(cluster.settings())
    for name, workers, key in (("spread", 3, hostname), ("wide", 4, hostname), ("zones", 2, "zone")):
        cluster.podgroup(name, workers)
        term = {"topologyKey": key, "labelSelector": {"matchLabels": {"job": name}}}
        anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        for i in range(workers):
            cluster.pod(f"{name}-w{i}", 1, group=name, labels={"job": name}, affinity=anti)
    cluster.podgroup("even", 4)
    even = {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"job": "even"}},
    }
    for i in range(4):
        cluster.pod(f"even-w{i}", 1, group="even", labels={"job": "even"}, topologySpreadConstraints=[even])
    cluster.podgroup("close", 3)
    close = {"topologyKey": "zone", "labelSelector": {"matchLabels": {"job": "close"}}}
    for i in range(3):
        affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [close]}}
        cluster.pod(f"close-w{i}", 1, group="close", labels={"job": "close"}, affinity=affinity)
    # two gangs of one pod that must not share a node, pending together: one is bound first, the other beside it
    solo = {"topologyKey": hostname, "labelSelector": {"matchLabels": {"app": "solo"}}}
    for name in ("solo-a", "solo-b"):
        cluster.pod(
            name,
            1,
            labels={"app": "solo"},
            affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [solo]}},
        )

    def decided() -> None:
        assert len(set(cluster.bound().get(name) for name in ("solo-a", "solo-b")) - {None}) == 2
        assert sorted(cluster.bound("spread").values()) == sorted(nodes)
        assert sorted(zone_of[node] for node in cluster.bound("zones").values()) == ["z0", "z1"]
        assert sorted(zone_of[node] for node in cluster.bound("even").values()) == ["z0", "z0", "z1", "z1"]
        assert (
            len(cluster.bound("close")) == 3 and len({zone_of[node] for node in cluster.bound("close").values()}) == 1
        )
        annotations = cluster.group_object("wide")["metadata"].get("annotations", {})
        assert annotations["railforge.io/reason-code"] == "capacity.never-fits.spread"
        assert annotations["railforge.io/reason"] == (
            "does not fit even with nothing running: needs 4 pods at most 1 per node "
            "(spec.affinity.podAntiAffinity on kubernetes.io/hostname); the nodes it may use take 3"
        )

    eventually(decided)
    assert cluster.bound("wide") == {}
    # preferences towards bound pods: away from both solo pods' nodes, and beside solo-a
    bound = cluster.bound()
    cluster.pod("away", 1, affinity={"podAntiAffinity": {PREFERRED: [{"weight": 10, "podAffinityTerm": solo}]}})
    near = {
        "topologyKey": hostname,
        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["solo"]}]},
        "namespaces": [cluster.name],
    }
    cluster.pod("near", 1, affinity={"podAffinity": {PREFERRED: [{"weight": 10, "podAffinityTerm": near}]}})
    cluster.wait("both placed", lambda: {"away", "near"} <= set(cluster.bound()))
    assert cluster.bound()["away"] not in {bound["solo-a"], bound["solo-b"]}
    assert cluster.bound()["near"] in {bound["solo-a"], bound["solo-b"]}


def test_a_64_pod_gang_is_bound_whole_and_fast(cluster, run_scheduler):
    nodes = cluster.add_nodes(8, gpus=8)
    adapter = run_scheduler(cluster.settings())
    created = time.monotonic()
    cluster.podgroup("wide", 64)
    for index in range(64):
        cluster.pod(f"wide-{index:02d}", 1, group="wide")
    last_pod = time.monotonic()
    cluster.wait("64 pods bound", lambda: len(cluster.bound("wide")) == 64, 60)
    done = time.monotonic()
    placement = cluster.bound("wide")
    assert sorted(set(placement.values())) == nodes and all(list(placement.values()).count(node) == 8 for node in nodes)
    view = adapter.state.view()
    assert view.counters["pods_bound"] == 64 and view.counters.get("bind_errors", 0) == 0
    counters = view.counters
    print(
        f"64-pod gang: PodGroup created -> all bound {done - created:.2f} s (last pod created -> all bound "
        f"{done - last_pod:.2f} s; placement written in {counters['plan_seconds'] * 1000:.0f} ms, 64 bindings in "
        f"{counters['bind_seconds'] * 1000:.0f} ms, decide {view.last_decide_seconds * 1000:.1f} ms)"
    )


def test_two_queues_share_by_weight(cluster, run_scheduler):
    cluster.add_nodes(8, gpus=8)
    vision, speech = f"{cluster.name}-vision", f"{cluster.name}-speech"
    cluster.queue(vision, overQuotaWeight=1)
    cluster.queue(speech, overQuotaWeight=3)
    for index in range(8):
        cluster.gang(f"v{index}", 1, labels={"railforge.io/queue": vision})
        cluster.gang(f"s{index}", 1, labels={"railforge.io/queue": speech})
    # every gang is in the first snapshot: the scheduler starts once all are submitted
    run_scheduler(cluster.settings(policy={"backfill": "none", "fair_share_half_life": 0}))

    def shared() -> None:
        started = [name[0] for name in cluster.bound()]
        assert (started.count("s"), started.count("v")) == (6, 2)

    eventually(shared)

    def explained() -> None:
        waiting = [name for name in (f"v{i}" for i in range(8)) if not cluster.bound(name)]
        for name in waiting:
            assert cluster.group_object(name)["metadata"].get("annotations", {}).get("railforge.io/reason"), name

    eventually(explained)


def test_reclaim_evicts_a_borrower_whole(cluster, run_scheduler):
    owner, adapter = borrowers_bound(cluster, run_scheduler)
    cluster.gang("claim", 1, gpus=8, labels={"railforge.io/queue": owner})

    def reclaimed() -> None:
        assert list(cluster.bound("claim")) == ["claim-0"]
        left = {pod.metadata.labels["scheduling.x-k8s.io/pod-group"] for pod in cluster.pods() if pod.spec.node_name}
        assert left == {"claim", "b0"} or left == {"claim", "b1"}, left

    eventually(reclaimed)
    evicted = ({"b0", "b1"} - {p.metadata.labels["scheduling.x-k8s.io/pod-group"] for p in cluster.pods()}).pop()
    assert not cluster.pods(evicted)  # whole: neither of its two pods is left
    assert any(e.startswith("Evicted: evicted (reclaim): reclaimed by queue") for e in cluster.events(evicted))
    assert [d.gang for d in adapter.state.view().recent if d.kind == "evict"] == [f"{cluster.name}/{evicted}"]


def test_a_gang_waiting_behind_a_reservation_is_told_once_as_a_warning(cluster, run_scheduler):
    """Passes every 0.2 s for 8 s while the reservation's start is under a minute away: the reason names the start
    as a time, so it reads the same in every pass, and each object gets one Warning FailedScheduling Event (a
    countdown would make a new message, so a new Event, every second)."""
    cluster.add_nodes(1, gpus=8)
    adapter = run_scheduler(cluster.settings(resync_seconds=0.2))
    cluster.gang("running", 1, annotations={"railforge.io/runtime": "50s"})
    cluster.wait("the first gang bound", lambda: len(cluster.bound("running")) == 1)
    (pod,) = cluster.gang("next", 1)

    def reserved() -> str:
        reason = cluster.group_object("next")["metadata"]["annotations"]["railforge.io/reason"]
        assert 40 < reserved_in(reason) <= 50, reason
        return reason

    reason = eventually(reserved)
    passes = adapter.state.view().counters["decide_calls"]
    time.sleep(8)
    assert adapter.state.view().counters["decide_calls"] - passes >= 20
    adapter.reporter.drain()
    assert reserved() == reason
    for name in ("next", pod):
        events = cluster.core.list_namespaced_event(cluster.name, field_selector=f"involvedObject.name={name}").items
        assert [(e.type, e.reason, e.message) for e in events] == [("Warning", "FailedScheduling", reason)], name


def test_a_reservation_is_held_while_smaller_gangs_backfill(cluster, run_scheduler):
    cluster.add_nodes(4, gpus=8)
    adapter = run_scheduler(cluster.settings())
    cluster.gang("running", 2, annotations={"railforge.io/runtime": "2h"})
    cluster.wait("the first gang bound", lambda: len(cluster.bound("running")) == 2)
    for name, pods, runtime in (("big", 4, "3h"), ("short", 1, "50m"), ("long", 1, "25h")):
        cluster.gang(name, pods, annotations={"railforge.io/runtime": runtime})
        time.sleep(1.1)  # creation times a second apart: big is first in line

    def backfilled() -> None:
        assert len(cluster.bound("short")) == 1
        short = cluster.core.read_namespaced_pod("short-0", cluster.name)
        assert short.metadata.annotations["railforge.io/backfilled-past"] == f"{cluster.name}/big"
        big = cluster.group_object("big")["metadata"]["annotations"]["railforge.io/reason"]
        assert 7080 < reserved_in(big) <= 7200, big  # when the running gang's 2 h are up
        long = cluster.group_object("long")["metadata"]["annotations"]["railforge.io/reason"]
        assert long.startswith(f"blocked behind reservation of gang {cluster.name}/big"), long

    eventually(backfilled)
    assert cluster.bound("big") == {} and cluster.bound("long") == {}
    pending = {p.gang: p for p in adapter.state.view().pending}
    assert pending[f"{cluster.name}/big"].reserved_start is not None

    def planned() -> None:  # long, behind big's reservation, is expected to start when big's 3 h end
        starts = {
            name: decode_expected_start(cluster.group_object(name)["metadata"]["annotations"][EXPECTED_START])
            for name in ("big", "long")
        }
        assert 7080 < starts["big"] - time.time() <= 7260, starts
        assert starts["long"] - starts["big"] == 3 * 3600, starts

    eventually(planned)


def test_a_failed_member_restarts_the_whole_gang_after_its_backoff(cluster, run_scheduler):
    cluster.add_nodes(2, gpus=8)
    adapter = run_scheduler(cluster.settings(policy={"restart_backoff_base": 3}))
    pods = cluster.gang("flaky", 2)
    cluster.wait("the gang bound", lambda: len(cluster.bound("flaky")) == 2)
    first_uids = {pod.metadata.uid for pod in cluster.pods("flaky")}
    end_member(cluster.core, cluster.name, pods[1], "main", "rank 1: NCCL timeout")

    def restarted() -> None:
        assert not {pod.metadata.uid for pod in cluster.pods("flaky")} & first_uids  # both pods deleted
        annotations = cluster.group_object("flaky")["metadata"]["annotations"]
        assert annotations["railforge.io/restarts"] == "1"
        assert any(e.startswith(f"Restarted: restarted: member {pods[1]} failed") for e in cluster.events("flaky"))
        # why it failed outlives its pod: on the PodGroup and in a Warning Event (no kubelet here: no log lines)
        why = f"member {pods[1]} container main exited 3 (Error): rank 1: NCCL timeout"
        assert annotations["railforge.io/last-failure"] == why
        assert f"MemberFailed: {why}" in cluster.events("flaky")

    eventually(restarted)
    restarted_at = time.monotonic()
    for pod in pods:  # what the gang's owner (an MPIJob, a Job) does
        cluster.pod(pod, 8, group="flaky")

    def waiting_out_backoff() -> None:
        annotations = cluster.group_object("flaky")["metadata"]["annotations"]
        assert annotations.get("railforge.io/reason-code") == "restart.backoff", annotations

    eventually(waiting_out_backoff, 3)
    cluster.wait("the gang bound again", lambda: len(cluster.bound("flaky")) == 2, 30)
    assert time.monotonic() - restarted_at > 1.5  # not before its backoff (3 s from the restart) ended
    assert [d.kind for d in adapter.state.view().recent if d.gang == f"{cluster.name}/flaky"] == [
        "bind",
        "restart",
        "bind",
    ]


def test_a_gang_past_its_restarts_fails_and_is_not_scheduled_again(cluster, run_scheduler):
    cluster.add_nodes(1, gpus=8)
    run_scheduler(cluster.settings(policy={"failure_policy": "fail"}))
    pods = cluster.gang("doomed", 2, gpus=4)
    cluster.wait("the gang bound", lambda: len(cluster.bound("doomed")) == 2)
    cluster.core.patch_namespaced_pod_status(pods[0], cluster.name, {"status": {"phase": "Failed"}})

    def failed() -> None:
        annotations = cluster.group_object("doomed")["metadata"].get("annotations", {})
        assert annotations.get("railforge.io/failed", "").startswith(f"member {pods[0]} failed"), annotations
        # the member still running is deleted; the failed one stays for its logs and exit code
        assert [(pod.metadata.name, pod.status.phase) for pod in cluster.pods("doomed")] == [(pods[0], "Failed")]
        assert any(e.startswith("Failed: failed: member") for e in cluster.events("doomed"))

    eventually(failed)
    cluster.pod(pods[1], 4, group="doomed")  # an owner that makes the deleted one again anyway

    def kept_waiting() -> None:
        group = cluster.group_object("doomed")
        assert group["metadata"]["annotations"].get("railforge.io/reason-code") == "gang.failed"
        assert group["status"]["phase"] == "Failed"

    eventually(kept_waiting)
    assert pods[1] not in cluster.bound("doomed")


def test_a_node_reserved_for_maintenance_takes_only_gangs_that_end_before(cluster, run_scheduler):
    (node,) = cluster.add_nodes(1, gpus=8)
    window = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    cluster.core.patch_node(node, {"metadata": {"annotations": {"railforge.io/maintenance-from": window}}})
    run_scheduler(cluster.settings())
    cluster.gang("long", 1, gpus=8, annotations={"railforge.io/runtime": "2h"})
    cluster.gang("short", 1, gpus=4, annotations={"railforge.io/runtime": "30m"})
    cluster.wait("the short gang bound", lambda: cluster.bound() == {"short-0": node})

    def told() -> None:
        annotations = cluster.group_object("long")["metadata"]["annotations"]
        assert annotations["railforge.io/reason-code"] == "reserved.maintenance", annotations
        assert f"maintenance of {node} from {window}" in annotations["railforge.io/reason"], annotations

    eventually(told)
    assert "long-0" not in cluster.bound()


def test_a_gang_past_its_walltime_is_ended_and_says_why(cluster, run_scheduler):
    cluster.add_nodes(1, gpus=8)
    run_scheduler(cluster.settings(policy={"walltime_grace": 1}))
    cluster.gang("overrun", 2, gpus=4, annotations={"railforge.io/runtime": "2s"})
    cluster.wait("the gang bound", lambda: len(cluster.bound("overrun")) == 2)

    def ended() -> None:
        annotations = cluster.group_object("overrun")["metadata"].get("annotations", {})
        expected = "ran past its max runtime of 2s and the walltime grace of 1s"
        assert annotations.get("railforge.io/failed") == expected, annotations
        assert not cluster.pods("overrun")
        assert any(e.startswith("Failed: failed: ran past its max runtime") for e in cluster.events("overrun"))

    eventually(ended)


def test_a_restarted_gang_keeps_off_the_node_where_its_member_failed(cluster, run_scheduler):
    cluster.add_nodes(2, gpus=8)
    run_scheduler(cluster.settings(policy={"restart_backoff_base": 1}))
    pods = cluster.gang("retry", 2, gpus=4)  # both fit on either node
    cluster.wait("the gang bound", lambda: len(cluster.bound("retry")) == 2)
    failed_on = cluster.bound("retry")[pods[0]]
    cluster.core.patch_namespaced_pod_status(pods[0], cluster.name, {"status": {"phase": "Failed"}})
    cluster.wait("the gang restarted", lambda: not cluster.pods("retry"))
    annotations = cluster.group_object("retry")["metadata"]["annotations"]
    assert json.loads(annotations["railforge.io/avoid-nodes"])["nodes"] == [failed_on]
    for pod in pods:  # its owner makes them again
        cluster.pod(pod, 4, group="retry")
    cluster.wait("bound again", lambda: len(cluster.bound("retry")) == 2)
    assert failed_on not in cluster.bound("retry").values()
