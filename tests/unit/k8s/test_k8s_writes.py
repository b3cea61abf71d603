"""The write side without a cluster: the assume cache laid over the informers' objects, the fence that stops every
write of a replica whose leadership is not current (no request is even built: ``api`` is None here), and the
disruption budgets a reclaim is planned against."""

from railforge.k8s.translate import GangObjects
from railforge.k8s.views import SchedulerState
from railforge.k8s.writes import DELETING, Budgets, WriteSide
from railforge.scheduler import Bind


def write_side(leading: bool = True) -> WriteSide:
    return WriteSide(None, None, lambda: leading, 0, 0.0, SchedulerState(), None, None, lambda: None)


def pod(name: str, node: str | None = None, **annotations) -> dict:
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "annotations": annotations},
        "spec": {"nodeName": node} if node else {},
    }


def test_pods_bound_or_deleted_here_look_so_until_the_informer_shows_it():
    writes = write_side()
    writes.assumed["uid-a"] = ("n1", {"railforge.io/started-at": "1.0"})
    writes.deleted |= {"uid-b", "uid-c"}
    shown = writes.overlay_pods([pod("a"), pod("b", "n2"), pod("c"), pod("d")])
    placed = [(p["metadata"]["name"], p["spec"].get("nodeName")) for p in shown]
    assert placed == [("a", "n1"), ("b", "n2"), ("d", None)]
    assert shown[0]["metadata"]["annotations"] == {"railforge.io/started-at": "1.0"}
    assert shown[1]["metadata"]["deletionTimestamp"] == DELETING  # leaving, not a member that failed
    # once the informer shows the bind and the pods gone, nothing is remembered
    writes.overlay_pods([pod("a", "n1"), pod("d")])
    assert writes.assumed == {} and writes.deleted == set()


def test_annotations_written_on_an_owner_hold_until_the_informer_shows_them():
    writes = write_side()
    group = {"metadata": {"name": "job", "uid": "uid-job", "annotations": {"railforge.io/placement": "{}"}}}
    writes.patched["uid-job"] = {"railforge.io/restarts": "1", "railforge.io/placement": None}
    assert writes.overlay_owner(group)["metadata"]["annotations"] == {"railforge.io/restarts": "1"}
    assert group["metadata"]["annotations"] == {"railforge.io/placement": "{}"}  # the cache's object is not written
    group["metadata"]["annotations"] = {"railforge.io/restarts": "1"}
    assert writes.overlay_owner(group) is group
    assert writes.patched == {}


def test_a_replica_not_leading_writes_nothing():
    writes = write_side(leading=False)
    objects = GangObjects("ml/job", "ml", None, None, [pod("a")])
    assert writes.bind(pod("a"), "n1", {}) is False
    assert writes.write_plan(objects, Bind("ml/job", {"a": "n1"})) is False
    assert writes.assumed == {} and writes.patched == {}
    assert writes.state.view().counters["fenced_writes"] == 2


def budget(name: str, allowed: int, selector: dict | None, generation: int = 1, observed: int = 1) -> dict:
    return {
        "metadata": {"name": name, "generation": generation},
        "spec": {"selector": selector},
        "status": {"disruptionsAllowed": allowed, "observedGeneration": observed},
    }


def labelled(name: str, **labels) -> dict:
    return {"metadata": {"name": name, "labels": labels}}


def test_budgets_refuse_a_gang_whole_and_count_what_a_pass_evicts():
    team = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]}
    items = [budget("team-a", 3, team), budget("unread", 9, None), budget("everyone", 9, {})]
    reads = []
    budgets = Budgets(lambda namespace: reads.append(namespace) or {"items": items})
    two = [labelled("p0", team="a"), labelled("p1", team="a")]
    assert budgets.refuse("ml", two) is None  # 2 of 3 allowed: evicted, 1 left
    refusal = budgets.refuse("ml", two)
    assert refusal == "would take 2 pods that PodDisruptionBudget ml/team-a covers; it allows 1 disruption now"
    assert budgets.refuse("ml", [labelled("p2", team="b")]) is None  # only the empty selector covers it
    assert reads == ["ml"]  # one read per namespace and pass


def test_a_budget_its_controller_has_not_seen_allows_nothing():
    budgets = Budgets(lambda namespace: {"items": [budget("new", 5, {}, generation=2, observed=1)]})
    assert "allows 0 disruptions" in budgets.refuse("ml", [labelled("p0")])
