"""One event sequence through the simulator and through the scheduler on the real API server: the core's inputs
agree state by state, and each host accrues usage between its calls by the host contract (``scheduler.host``)."""

import threading

import pytest
from conftest import eventually

from railforge.k8s.adapter import Adapter
from railforge.k8s.settings import settings_from_mapping
from railforge.scheduler import GPU, Gang, Member, Queue, Scheduler, SchedulerConfig, host
from railforge.sim.cluster import ClusterShape, build_nodes
from railforge.sim.engine import SimJob, Simulator

HOUR = 3600.0
GANGS = ("first", "second", "third")  # two 8-GPU pods each; four 8-GPU nodes hold two of them


def state(snapshot) -> tuple:
    """What a call is about: the waiting and running gangs (by their own name) and the GPUs each queue holds."""

    def name(gang: Gang) -> str:
        return gang.name.rpartition("/")[2]

    return (
        tuple(sorted(name(gang) for gang in snapshot.pending)),
        tuple(sorted(name(running.gang) for running in snapshot.running)),
        tuple(sorted(host.held_gpus(snapshot.running).items())),
    )


def decision_points(snapshots) -> list[tuple]:
    """The states in which a gang waits, in order, each once. The simulator calls the core only when something
    happens; the adapter also on every resync, and while a gang's pods are still being created."""
    out: list[tuple] = []
    for snapshot in snapshots:
        seen = state(snapshot)
        if seen[0] and (not out or out[-1] != seen):
            out.append(seen)
    return out


def assert_usage_follows_the_contract(snapshots, half_life: float) -> None:
    """Each call's usage is the previous call's, accrued over the time between them for what was running."""
    usage: dict[str, float] = {}
    previous = snapshots[0].now
    for snapshot in snapshots:
        usage = host.accrue_usage(usage, host.held_gpus(snapshot.running), snapshot.now - previous, half_life)
        previous = snapshot.now
        expected = {queue: value for queue, value in usage.items() if value}
        assert {queue: value for queue, value in snapshot.usage.items() if value} == pytest.approx(expected)


def recording(decide, into: list, lock: threading.Lock):
    def record(snapshot):
        with lock:
            into.append(snapshot)
        return decide(snapshot)

    return record


def simulated(config: SchedulerConfig) -> list:
    jobs = [
        SimJob(
            Gang(name, "default", (Member(f"{name}-0", {GPU: 8}), Member(f"{name}-1", {GPU: 8})), submit_time=t), 86400
        )
        for name, t in zip(GANGS, (0.0, HOUR, 2 * HOUR), strict=True)
    ]
    snapshots: list = []
    decide = recording(Scheduler().decide, snapshots, threading.Lock())
    Simulator(build_nodes(ClusterShape(nodes=4)), [Queue("default")], jobs, config, decide, resync=600.0).run()
    return [snapshot for snapshot in snapshots if snapshot.now < 86400]  # before the first gang ends


def test_the_simulator_and_the_adapter_feed_the_core_the_same_states(cluster):
    half_life = 600.0
    config = SchedulerConfig.preset("railforge", fair_share_half_life=half_life)
    cluster.add_nodes(4, gpus=8)
    settings = settings_from_mapping(cluster.settings(policy={"fair_share_half_life": half_life}))
    assert settings.policy.fair_share_half_life == half_life
    api = cluster.plane.client()
    adapter = Adapter(api, settings)
    seen: list = []
    lock = threading.Lock()
    adapter.decide = recording(adapter.decide, seen, lock)
    adapter.start()

    def bound(name: str) -> None:
        assert len(cluster.bound(name)) == 2

    def waits(name: str) -> None:
        with lock:
            assert state(seen[-1])[0] == (name,)

    try:
        for name in GANGS:
            cluster.gang(name, 2, gpus=8)
            eventually(lambda name=name: bound(name) if name != GANGS[-1] else waits(name))
    finally:
        adapter.stop()
        api.close()
    with lock:
        adapter_snapshots = list(seen)

    simulator_snapshots = simulated(config)
    assert (
        decision_points(adapter_snapshots)
        == decision_points(simulator_snapshots)
        == [
            (("first",), (), ()),
            (("second",), ("first",), (("default", 16),)),
            (("third",), ("first", "second"), (("default", 32),)),
        ]
    )
    assert cluster.bound(GANGS[-1]) == {}
    assert_usage_follows_the_contract(simulator_snapshots, half_life)
    assert_usage_follows_the_contract(adapter_snapshots, half_life)
