"""What the scheduler shows of itself: its decision log, and the dashboard's document (the GPU map from each pod's
own requests, the leader named)."""

from types import SimpleNamespace

from railforge.k8s.dashboard import state_document
from railforge.k8s.views import RunningView, SchedulerState, StateView
from railforge.scheduler import GPU


def test_a_decision_carried_out_is_kept_and_logged_as_one_line(caplog):
    state = SchedulerState()
    with caplog.at_level("INFO", logger="railforge.decisions"):
        state.record("bind", "team-a/llm", "2/2 pods on 2 nodes", "team-a", ["gpu-02", "gpu-01", "gpu-02"])
        state.record("defer", "team-b/x", "waits for the pods it replaces to leave")
    assert [record.getMessage() for record in caplog.records] == [
        "bind gang=team-a/llm queue=team-a nodes=gpu-01,gpu-02: 2/2 pods on 2 nodes",
        "defer gang=team-b/x queue=- nodes=-: waits for the pods it replaces to leave",
    ]
    (bound, deferred) = state.view().recent
    assert (bound.kind, bound.queue, bound.nodes) == ("bind", "team-a", ("gpu-01", "gpu-02"))
    assert (deferred.queue, deferred.nodes) == ("", ())


def test_the_gpu_map_counts_each_pods_own_gpus_and_names_the_leader():
    state = SchedulerState()
    launcher_apart = RunningView(
        "ns/mpi", "q", {"launcher": "n1", "worker-0": "n2"}, 8, {"worker-0": 8}, 0.0, False, None
    )
    state.publish(StateView(leader=True, synced=True, running=[launcher_apart], nodes={"n1": {GPU: 8}, "n2": {GPU: 8}}))
    state.set_leader(False, True, "replica-b")
    source = SimpleNamespace(state=state, settings=SimpleNamespace(scheduler_name="railforge"))
    document = state_document(source)
    (domain,) = document["domains"]
    assert [(node["name"], node["used_gpus"], node["gangs"]) for node in domain["nodes"]] == [
        ("n1", 0, [{"gang": "ns/mpi", "pods": 1, "gpus": 0}]),
        ("n2", 8, [{"gang": "ns/mpi", "pods": 1, "gpus": 8}]),
    ]
    assert (document["leader"], document["leader_identity"]) == (False, "replica-b")


def test_a_view_taken_stays_as_it_was_when_the_state_moves_on():
    state = SchedulerState()
    first = RunningView("ns/a", "q", {"a-0": "n1"}, 8, {"a-0": 8}, 0.0, False, None)
    state.publish(StateView(running=[first]))
    state.set_leader(True, True, "replica-a")
    state.count("decide_calls")
    taken = state.view()
    state.set_leader(False, True, "replica-b")  # changes the published view's leader fields in place
    state.count("decide_calls")
    state.record("bind", "ns/b", "1/1 pods")
    state.publish(StateView(running=[]))
    assert (taken.leader, taken.leader_identity) == (True, "replica-a")
    assert taken.running == [first] and taken.counters == {"decide_calls": 1} and taken.recent == []
    now = state.view()
    assert (now.leader, now.leader_identity, now.running) == (False, "replica-b", [])
    assert now.counters == {"decide_calls": 2} and [d.gang for d in now.recent] == ["ns/b"]
