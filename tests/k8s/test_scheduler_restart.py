"""The scheduler as its own process (``railforge scheduler run``): SIGKILL in the middle of binding a 64-pod gang,
then a restart binds every pod exactly once; a partly bound gang whose placement no longer fits is released; two
replicas, one binds, and the other takes over when it dies; a leader stopped mid-gang past its renew deadline
binds nothing when it continues, and the bind it had passed the fence for is refused by the API server."""

import json
import signal
import time
from concurrent.futures import ThreadPoolExecutor

from conftest import eventually, scheduler_process
from kubernetes import client, watch

from railforge.k8s import rest
from railforge.k8s.events import Reporter
from railforge.k8s.metrics import SchedulerMetrics
from railforge.k8s.views import SchedulerState
from railforge.k8s.writes import WriteSide
from railforge.testbed.procs import wait_for

GPUS_PER_NODE = 8


def kill_mid_bind(cluster, process, group: str, pods: int, sig: signal.Signals = signal.SIGKILL) -> int:
    """Send the scheduler ``sig`` at its first bound pod of the gang; how many were bound then."""
    stream = watch.Watch()
    for event in stream.stream(
        cluster.core.list_namespaced_pod,
        cluster.name,
        label_selector=f"scheduling.x-k8s.io/pod-group={group}",
        timeout_seconds=60,
    ):
        if event["object"].spec.node_name:
            process.popen.send_signal(sig)
            if sig == signal.SIGKILL:
                process.popen.wait()
            stream.stop()
    bound = len(cluster.bound(group))
    assert 0 < bound < pods, f"{bound} of {pods} pods were bound when the scheduler was signalled"
    return bound


def fast_election(cluster) -> dict:
    """Leader election on a Lease of the test's namespace: 4 s lease, 3 s renew deadline, renewed every 0.5 s."""
    return {
        "enabled": True,
        "namespace": cluster.name,
        "lease_duration_seconds": 4,
        "renew_deadline_seconds": 3,
        "retry_period_seconds": 0.5,
    }


def lease_holder(cluster) -> str:
    leases = client.CoordinationV1Api(cluster.plane.api)
    try:
        return leases.read_namespaced_lease(cluster.name, cluster.name).spec.holder_identity or ""
    except client.ApiException:
        return ""  # not created yet


def gang_of_ones(cluster, name: str, pods: int) -> dict[str, str]:
    """A gang of one-GPU pods; pod name -> uid."""
    cluster.podgroup(name, pods)
    return {cluster.pod(f"{name}-{i:02d}", 1, group=name)["metadata"]["uid"]: f"{name}-{i:02d}" for i in range(pods)}


def test_sigkill_mid_bind_then_restart_binds_every_pod_exactly_once(cluster, control_plane):
    nodes = cluster.add_nodes(8, gpus=GPUS_PER_NODE)
    settings = cluster.settings(bind_workers=1)  # one bind at a time: the kill lands mid-gang
    uids = gang_of_ones(cluster, "wide", 64)
    first = scheduler_process(control_plane, settings, f"{cluster.name}-1")
    try:
        bound_at_kill = kill_mid_bind(cluster, first, "wide", 64)
    finally:
        first.stop()
    plan = json.loads(cluster.group_object("wide")["metadata"]["annotations"]["railforge.io/placement"])
    assert sorted(plan) == sorted(uids)  # the whole placement was written before the first bind
    second = scheduler_process(control_plane, settings, f"{cluster.name}-2")
    try:
        wait_for("the rest of the gang bound", lambda: len(cluster.bound("wide")) == 64, 60, [second])
        time.sleep(1)  # a few more passes: nothing moves
        pods = cluster.pods("wide")
        assert {pod.metadata.uid: pod.metadata.name for pod in pods} == uids  # none deleted or recreated
        assert {pod.metadata.uid: pod.spec.node_name for pod in pods} == plan  # completed where it was planned
        per_node = {node: list(plan.values()).count(node) for node in nodes}
        assert all(count <= GPUS_PER_NODE for count in per_node.values()), per_node
        log = second.log.read_text()
        (line,) = [
            line for line in log.splitlines() if f"INFO railforge.decisions: complete gang={cluster.name}/wide " in line
        ]
        assert line.endswith(f": completed an interrupted bind: {64 - bound_at_kill}/{64 - bound_at_kill} more pods")
        assert " bind " not in log  # no binding was refused: not one pod was bound twice
    finally:
        second.stop()
    print(f"killed after {bound_at_kill}/64 pods bound; the restart completed the other {64 - bound_at_kill}")


def test_a_partly_bound_gang_whose_placement_no_longer_fits_is_released(cluster, control_plane):
    cluster.add_nodes(2, gpus=GPUS_PER_NODE)
    settings = cluster.settings(bind_workers=1)
    uids = gang_of_ones(cluster, "torn", 16)
    first = scheduler_process(control_plane, settings, f"{cluster.name}-1")
    try:
        kill_mid_bind(cluster, first, "torn", 16)
    finally:
        first.stop()
    plan = json.loads(cluster.group_object("torn")["metadata"]["annotations"]["railforge.io/placement"])
    bound = {pod.metadata.uid for pod in cluster.pods("torn") if pod.spec.node_name}
    # another scheduler's pod takes the node where unbound members were planned
    taken = next(node for uid, node in plan.items() if uid not in bound)
    squatter = {
        "metadata": {"name": "squatter"},
        "spec": {
            "nodeName": taken,
            "containers": [
                {
                    "name": "c",
                    "image": "localhost/railforge-testpod:1",
                    "resources": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}},
                }
            ],
        },
    }
    cluster.core.create_namespaced_pod(cluster.name, squatter)
    second = scheduler_process(control_plane, settings, f"{cluster.name}-2")
    try:

        def released() -> None:
            left = {pod.metadata.uid for pod in cluster.pods("torn")}
            assert left == set(uids) - bound  # its bound pods deleted (an owner would recreate them)
            assert not any(pod.spec.node_name for pod in cluster.pods("torn"))
            assert "railforge.io/placement" not in cluster.group_object("torn")["metadata"].get("annotations", {})

        eventually(released, 30)
        released_line = f"release gang={cluster.name}/torn queue=default nodes="
        assert released_line in second.log.read_text()
        assert "released: a previous run bound it in part and its placement no longer fits" in second.log.read_text()
    finally:
        second.stop()


def test_a_pod_recreated_while_the_scheduler_was_down_releases_its_partly_bound_gang(cluster, control_plane):
    cluster.add_nodes(8, gpus=GPUS_PER_NODE)
    settings = cluster.settings(bind_workers=1)
    gang_of_ones(cluster, "redo", 64)
    first = scheduler_process(control_plane, settings, f"{cluster.name}-1")
    try:
        kill_mid_bind(cluster, first, "redo", 64)
    finally:
        first.stop()
    gone = next(pod for pod in cluster.pods("redo") if not pod.spec.node_name).metadata
    cluster.core.delete_namespaced_pod(gone.name, cluster.name, grace_period_seconds=0)
    cluster.wait("the pod gone", lambda: gone.uid not in {pod.metadata.uid for pod in cluster.pods("redo")})
    cluster.pod(gone.name, 1, group="redo")  # its owner recreates it: a uid the written placement does not name
    second = scheduler_process(control_plane, settings, f"{cluster.name}-2")
    try:

        def released() -> None:
            assert not cluster.bound("redo")  # never left running short of a pod
            assert "railforge.io/placement" not in cluster.group_object("redo")["metadata"].get("annotations", {})

        eventually(released, 30)
        time.sleep(1)  # more passes: what is left waits for its owner to recreate the released pods
        assert not cluster.bound("redo")
        log = second.log.read_text()
        assert f"release gang={cluster.name}/redo queue=default nodes=" in log
        assert "released: a previous run bound it in part and its placement names pods that no longer exist (1)" in log
    finally:
        second.stop()


def test_two_replicas_one_binds_and_the_other_takes_over(cluster, control_plane):
    cluster.add_nodes(2, gpus=GPUS_PER_NODE)
    settings = cluster.settings(leader_election=fast_election(cluster))
    replicas = [scheduler_process(control_plane, settings, f"{cluster.name}-{i}") for i in range(2)]
    try:
        wait_for("a leader", lambda: lease_holder(cluster) in {r.name for r in replicas}, 30, replicas)
        leader = next(r for r in replicas if r.name == lease_holder(cluster))
        standby = next(r for r in replicas if r is not leader)
        cluster.gang("first", 2, gpus=4)
        wait_for("the first gang bound", lambda: len(cluster.bound("first")) == 2, 30, replicas)
        assert "leading" in leader.log.read_text() and "leading" not in standby.log.read_text()
        leader.popen.send_signal(signal.SIGKILL)  # no hand-over: the standby waits out the lease
        leader.popen.wait()
        killed = time.monotonic()
        cluster.gang("second", 2, gpus=4)
        wait_for("the standby to bind", lambda: len(cluster.bound("second")) == 2, 30, [standby])
        took_over = time.monotonic() - killed
        assert lease_holder(cluster) == standby.name
        assert took_over < 4 + 3  # the lease's duration plus a few retry periods
        print(f"standby bound a new gang {took_over:.1f} s after the leader was killed (lease 4 s)")
    finally:
        for replica in replicas:
            replica.stop()


def test_a_leader_stopped_past_its_renew_deadline_binds_nothing_when_it_continues(cluster, control_plane):
    nodes = cluster.add_nodes(8, gpus=8)
    settings = cluster.settings(bind_workers=1, leader_election=fast_election(cluster))  # stopped mid-gang
    replicas = [scheduler_process(control_plane, settings, f"{cluster.name}-{i}") for i in range(2)]
    try:
        wait_for("a leader", lambda: lease_holder(cluster) in {r.name for r in replicas}, 30, replicas)
        leader = next(r for r in replicas if r.name == lease_holder(cluster))
        standby = next(r for r in replicas if r is not leader)
        gang_of_ones(cluster, "wide", 64)
        stopped_with = kill_mid_bind(cluster, leader, "wide", 64, signal.SIGSTOP)  # its other binds still queued
        for node in nodes:  # what the old leader must not bind onto after it continues
            cluster.core.patch_node(node, {"spec": {"unschedulable": True}})
        wait_for("the standby to take the lease", lambda: lease_holder(cluster) == standby.name, 30, [standby])
        # the standby finds the gang bound in part, on nodes now cordoned, and releases it
        wait_for("the standby to release the gang", lambda: not cluster.bound("wide"), 30, [standby])
        leader.popen.send_signal(signal.SIGCONT)
        time.sleep(3)  # six of the old leader's retry periods, time for its 60-odd queued binds
        assert cluster.bound("wide") == {}, "the replica that lost the lease bound pods after it continued"
        assert "no longer leader" in leader.log.read_text()
    finally:
        for replica in replicas:
            replica.popen.send_signal(signal.SIGCONT)
            replica.stop()
    print(f"leader stopped after {stopped_with}/64 binds; after it continued it bound none")


def test_a_bind_that_passed_the_fence_before_a_release_is_refused_after_it(cluster, control_plane, run_scheduler):
    """The stopped leader's one window, made certain: it passed the fence for a bind, stopped before sending it, and
    sends it once its standby has released the gang. The Binding carries the pod as that replica saw it; the release
    wrote every unbound member since, so the API server refuses it. A replica still leading binds anyway."""
    node = cluster.add_nodes(1, gpus=GPUS_PER_NODE)[0]
    names = {name: uid for uid, name in gang_of_ones(cluster, "late", 2).items()}
    api = control_plane.client()
    pods = f"/api/v1/namespaces/{cluster.name}/pods"
    seen = rest.call(api, "GET", f"{pods}/late-01")  # what the stopped replica decided on
    placement = {names["late-00"]: node, names["late-01"]: f"{cluster.name}-gone"}  # no longer fits: released
    cluster.custom.patch_namespaced_custom_object(
        "scheduling.x-k8s.io",
        "v1alpha1",
        cluster.name,
        "podgroups",
        "late",
        {"metadata": {"annotations": {"railforge.io/placement": json.dumps(placement)}}},
    )
    target = {"apiVersion": "v1", "kind": "Node", "name": node}
    rest.call(api, "POST", f"{pods}/late-00/binding", body={"metadata": {"name": "late-00"}, "target": target})
    run_scheduler(cluster.settings())  # the standby
    wait_for("the gang released", lambda: [p.metadata.name for p in cluster.pods("late")] == ["late-01"], 30)

    def replica(fence) -> WriteSide:
        state = SchedulerState()
        metrics, reporter = SchedulerMetrics(state), Reporter(api, cluster.name, 1.0)
        return WriteSide(api, ThreadPoolExecutor(1), fence, None, 0.0, state, metrics, reporter, lambda: None)

    checks = iter([True])  # the check it passed before it stopped; every later one says no
    stopped = replica(lambda: next(checks, False))
    assert not stopped.bind(seen, node, {})
    assert cluster.bound("late") == {}, "the bind decided before the release landed after it"
    assert stopped.state.view().counters["fenced_writes"] == 1  # after its conflict, the second Binding was not sent
    assert replica(lambda: True).bind(seen, node, {})  # the same stale view, leading: bound on the pod as it is
    assert cluster.bound("late") == {"late-01": node}
    api.close()
