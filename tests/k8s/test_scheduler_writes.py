"""The scheduler's write side keeps its promises on the real API server (issue 40): pods it must not bind keep their
gang waiting whole while the loop goes on deciding; a gang bound after waiting reads PodScheduled=True; one member
failure is one restart; a reclaim that a disruption budget refuses evicts nothing and says so; under churn, bound
pods read PodScheduled=True, a newcomer is told why it waits, and the write queue stays bounded. (A leader stopped
past its renew deadline: test_scheduler_restart.)"""

import threading
import time

from conftest import borrowers_bound, eventually
from kubernetes import client

GATE = [{"name": "example.com/hold"}]


def condition(cluster, pod: str):
    conditions = {c.type: c for c in cluster.core.read_namespaced_pod(pod, cluster.name).status.conditions or []}
    assert "PodScheduled" in conditions, f"{pod} has no PodScheduled condition yet"
    return conditions["PodScheduled"]


def annotations(cluster, group: str) -> dict:
    return cluster.group_object(group)["metadata"].get("annotations", {})


def test_pods_it_must_not_bind_keep_their_gang_waiting_and_the_loop_deciding(cluster, run_scheduler):
    cluster.add_nodes(2, gpus=8)
    adapter = run_scheduler(cluster.settings())
    cluster.podgroup("held", 4)
    for i in range(4):  # one pod of four still gated
        cluster.pod(f"held-{i}", 1, group="held", **({"schedulingGates": GATE} if i == 3 else {}))
    cluster.pod("lone-gated", 1, schedulingGates=GATE)
    cluster.pod("claims", 1, resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-claim"}])
    # Kubernetes' own gang API, which the test bed serves: one pod of a native PodGroup of 3 is not bound alone
    native = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": "native"}}
    native["spec"] = {"schedulingPolicy": {"gang": {"minCount": 3}}}
    cluster.custom.create_namespaced_custom_object("scheduling.k8s.io", "v1alpha2", cluster.name, "podgroups", native)
    cluster.pod("native-0", 1, schedulingGroup={"podGroupName": "native"})
    cluster.gang("good", 3, gpus=1)  # beside them: decided and bound
    cluster.wait("the good gang bound", lambda: len(cluster.bound("good")) == 3)

    def said_why() -> None:
        held = annotations(cluster, "held")
        assert held["railforge.io/reason-code"] == "gang.gated", held
        assert "pod held-3 has spec.schedulingGates example.com/hold" in held["railforge.io/reason"]
        assert "spec.schedulingGates example.com/hold" in condition(cluster, "lone-gated").message
        assert f"waits for ResourceClaim {cluster.name}/gpu-claim" in condition(cluster, "claims").message
        native = cluster.custom.get_namespaced_custom_object(
            "scheduling.k8s.io", "v1alpha2", cluster.name, "podgroups", "native"
        )
        waits = native["metadata"]["annotations"]["railforge.io/reason"]
        assert "minCount is 3 but fewer pods carry spec.schedulingGroup.podGroupName=native" in waits

    eventually(said_why)
    passes = adapter.state.view().counters["decide_calls"]
    time.sleep(4.5)  # two resync periods
    counters = adapter.state.view().counters
    assert counters["decide_calls"] > passes  # the loop keeps deciding
    assert "bind_errors" not in counters and "fenced_writes" not in counters  # not one Binding tried and refused
    assert cluster.bound("held") == {} and set(cluster.bound()) == {"good-0", "good-1", "good-2"}
    assert not [e for e in cluster.events("lone-gated") if e.startswith("Scheduled")]
    ungate = [{"op": "remove", "path": "/spec/schedulingGates"}]  # a JSON patch: a merge patch keeps the list
    cluster.core.patch_namespaced_pod("held-3", cluster.name, ungate)
    cluster.wait("the ungated gang bound whole", lambda: len(cluster.bound("held")) == 4)


def test_a_gang_bound_after_waiting_reads_pod_scheduled_true(cluster, run_scheduler):
    cluster.add_nodes(1, gpus=8)
    adapter = run_scheduler(cluster.settings())
    behind = threading.Event()
    adapter.reporter.work.put("behind", behind.wait)  # the reporter falls behind: why the gang waits, still waiting
    pods = cluster.gang("later", 2, gpus=8)  # 16 GPUs; one node of 8
    time.sleep(1)  # passes that say it does not fit
    cluster.add_nodes(1, gpus=8, prefix="more-")
    cluster.wait("the gang bound", lambda: len(cluster.bound("later")) == 2)
    behind.set()
    adapter.reporter.drain()
    for pod in pods:
        assert any(e.startswith("FailedScheduling: ") for e in cluster.events(pod))  # it was told why it waited
        after = condition(cluster, pod)
        assert (after.status, after.reason, after.message) == ("True", None, None), after


def test_one_member_failure_is_one_restart_while_its_pods_are_still_listed(cluster, run_scheduler):
    cluster.add_nodes(2, gpus=8)
    # a grace period keeps deleted pods listed (terminating) as a kubelet does while their containers stop
    settings = cluster.settings(eviction_grace_seconds=60, policy={"restart_backoff_base": 30})
    adapter = run_scheduler(settings)
    pods = cluster.gang("flaky", 2)
    cluster.wait("the gang bound", lambda: len(cluster.bound("flaky")) == 2)
    cluster.core.patch_namespaced_pod_status(pods[1], cluster.name, {"status": {"phase": "Failed"}})
    cluster.wait("the restart", lambda: "railforge.io/not-before" in annotations(cluster, "flaky"))
    first = annotations(cluster, "flaky")
    terminating = cluster.core.read_namespaced_pod(pods[0], cluster.name)
    assert terminating.metadata.deletion_timestamp is not None
    # its container stopped by the deletion exits non-zero, as a kubelet reports it, while the pod is still listed
    cluster.core.patch_namespaced_pod_status(pods[0], cluster.name, {"status": {"phase": "Failed"}})
    cluster.pod(pods[1], 8, group="flaky")  # the owner recreates the pod that is gone
    time.sleep(3)  # many passes
    assert annotations(cluster, "flaky")["railforge.io/restarts"] == first["railforge.io/restarts"] == "1"
    assert annotations(cluster, "flaky")["railforge.io/not-before"] == first["railforge.io/not-before"]
    restarts = [d for d in adapter.state.view().recent if d.kind == "restart"]
    assert len(restarts) == 1 and adapter.state.view().counters["restarts"] == 1
    cluster.core.delete_namespaced_pod(pods[0], cluster.name, grace_period_seconds=0)  # the kubelet is done
    cluster.pod(pods[0], 8, group="flaky")

    def backing_off() -> None:
        assert annotations(cluster, "flaky").get("railforge.io/reason-code") == "restart.backoff"

    eventually(backing_off)
    assert cluster.bound("flaky") == {}  # the 30 s backoff holds from the first decision
    assert float(first["railforge.io/not-before"]) - time.time() > 20


def test_a_reclaim_a_disruption_budget_refuses_evicts_nothing_and_says_so(cluster, run_scheduler):
    owner, adapter = borrowers_bound(cluster, run_scheduler)
    borrowers = {"key": "scheduling.x-k8s.io/pod-group", "operator": "In", "values": ["b0", "b1"]}
    selector = {"matchExpressions": [borrowers]}
    budget = {"metadata": {"name": "borrowers"}, "spec": {"maxUnavailable": 0, "selector": selector}}
    client.PolicyV1Api(cluster.plane.api).create_namespaced_pod_disruption_budget(cluster.name, budget)
    cluster.gang("claim", 1, gpus=8, labels={"railforge.io/queue": owner})

    def said_so() -> None:
        claim = annotations(cluster, "claim")
        assert claim["railforge.io/reason-code"] == "reclaim.blocked"
        assert f"PodDisruptionBudget {cluster.name}/borrowers" in claim["railforge.io/reason"]
        assert cluster.group_object("claim")["status"]["phase"] == "Pending"
        said = [e for b in ("b0", "b1") for e in cluster.events(b)]
        blocked = [e for e in said if e.startswith("EvictionBlocked: reclaim waits")]
        assert blocked

    eventually(said_so)
    time.sleep(3)  # many passes: the refusal is not retried in a loop
    assert len(cluster.bound()) == 4 and cluster.bound("claim") == {}  # not half evicted: nothing evicted
    assert not [e for b in ("b0", "b1") for e in cluster.events(b) if e.startswith("Evicted")]
    counters = adapter.state.view().counters
    assert "evictions" not in counters and counters["evictions_blocked"] == 1  # budgets read again after 30 s


def test_under_churn_the_conditions_that_matter_are_written_and_the_queue_stays_bounded(cluster, run_scheduler):
    """Pods come and go for a while (about a thousand lone pods: some bound and deleted a moment later, some too
    big to ever fit): every pod bound reads PodScheduled=True, a pod that arrives in the churn is told why it waits
    within seconds, and what waits to be written stays bounded."""
    cluster.add_nodes(4, gpus=8)
    adapter = run_scheduler(cluster.settings())
    stop = threading.Event()
    made = []
    biggest_queue = 0

    def churn() -> None:
        index = 0
        while not stop.is_set():
            big = index % 10 == 0  # 16 GPUs on 8-GPU nodes: waits for ever, with a reason
            name = f"churn-{index}"
            cluster.pod(name, 16 if big else 1)
            made.append(name)
            index += 1
            if index % 20 == 0:  # the bound ones leave as others come
                for pod in cluster.pods():
                    if pod.spec.node_name:
                        cluster.core.delete_namespaced_pod(pod.metadata.name, cluster.name, grace_period_seconds=0)

    worker = threading.Thread(target=churn, daemon=True)
    worker.start()
    deadline = time.monotonic() + 25
    while time.monotonic() < deadline:
        biggest_queue = max(biggest_queue, len(adapter.reporter.work))
        time.sleep(0.2)
    cluster.pod("newcomer", 16)  # arrives in the churn: told why within seconds
    arrived = time.monotonic()
    eventually(lambda: condition(cluster, "newcomer").reason == "Unschedulable", timeout=10)
    told_in = time.monotonic() - arrived
    stop.set()
    worker.join(timeout=30)
    assert len(made) > 500, len(made)
    assert told_in < 10 and biggest_queue < 10_000, (told_in, biggest_queue)

    def bound_read_scheduled() -> None:
        for pod in cluster.pods():
            conditions = {c.type: c.status for c in pod.status.conditions or []}
            if pod.spec.node_name:
                assert conditions.get("PodScheduled") == "True", (pod.metadata.name, conditions)

    eventually(bound_read_scheduled, timeout=15)
    counters = adapter.state.view().counters
    assert "pass_errors" not in counters and counters["decide_calls"] > 10, counters
