"""Kubernetes objects -> the core's model: topology paths from node labels, queues, gangs, and what is refused."""

import importlib.util
import json
import math
import random
from pathlib import Path

import pytest

from railforge.k8s.gangapis import NATIVE, SCHEDULER_PLUGINS
from railforge.k8s.settings import settings_from_mapping
from railforge.k8s.translate import (
    TranslationCache,
    failure_action,
    node_topology,
    queues_from,
    runtime_seconds,
    translate,
)
from railforge.scheduler import Scheduler, Snapshot

ROOT = Path(__file__).resolve().parents[3]
SETTINGS = settings_from_mapping({})
CREATED = "2026-11-23T20:00:00Z"


def filter_labels(facts: dict) -> dict[str, str]:
    spec = importlib.util.spec_from_file_location("railforge_hw", ROOT / "plugins/filter/railforge_hw.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.railforge_node_labels(facts)


def node(name: str, gpus: int = 8, labels: dict | None = None) -> dict:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "64", "memory": "512Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(name: str, gpus: int = 8, group: str | None = None, namespace: str = "ml", **meta) -> dict:
    labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": CREATED,
            "labels": {**labels, **meta.pop("labels", {})},
            **meta,
        },
        "spec": {
            "schedulerName": "railforge",
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus), "cpu": "1"}}}],
        },
        "status": {"phase": "Pending"},
    }


def podgroup(name: str, min_member: int, namespace: str = "ml", **meta) -> dict:
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "creationTimestamp": CREATED, **meta},
        "spec": {"minMember": min_member},
    }


def run(nodes, pods, groups=(), queues=(), namespaces=(), foreign=(), native_groups=(), jobs=()):
    return translate(
        nodes,
        pods,
        foreign,
        {
            (api, g["metadata"]["namespace"], g["metadata"]["name"]): g
            for api, kind in ((SCHEDULER_PLUGINS, groups), (NATIVE, native_groups))
            for g in kind
        },
        queues,
        {n["metadata"]["name"]: n for n in namespaces},
        SETTINGS,
        now=1e9,
        jobs=jobs,
    )


DGX = {
    "gpu_count": 8,
    "gpu_architectures": ["Hopper"],
    "rail_count": 8,
    "rdma_link_layers": ["InfiniBand"],
    "nvlink": {"present": True},
}


def test_a_per_node_nvlink_value_stops_the_path():
    labels = {**filter_labels(DGX), "railforge.io/spine": "s0", "railforge.io/leaf": "l3"}
    assert labels["railforge.io/nvlink-domain"] == "node"
    assert node_topology("a", labels, SETTINGS.topology) == ("s0", "l3")
    no_nvlink = filter_labels({**DGX, "nvlink": {"present": False}})
    assert node_topology("a", {**no_nvlink, "railforge.io/spine": "s0"}, SETTINGS.topology) == ("s0",)


def test_a_multi_node_nvlink_fabric_is_a_shared_domain():
    fabric = {"cluster_uuid": "dc6e40c4-d722-4357-9ba6-5291dd461278", "clique_id": 2, "status": "Success"}
    labels = {**filter_labels({**DGX, "fabric": fabric}), "railforge.io/spine": "s0", "railforge.io/leaf": "l0"}
    assert node_topology("a", labels, SETTINGS.topology) == ("s0", "l0", "dc6e40c4-d722-4357-9ba6-5291dd461278.2")


def test_topograph_labels_are_read_when_ours_are_absent():
    labels = {
        "fabric.topograph.run/tier-1": "sw-spine-2",
        "fabric.topograph.run/tier-0": "sw-leaf-7",
        "accelerator.topograph.run/domain": "nvl72-a",
    }
    assert node_topology("a", labels, SETTINGS.topology) == ("sw-spine-2", "sw-leaf-7", "nvl72-a")
    # a missing level ends the path: finer levels are the node's own
    assert node_topology("a", {"accelerator.topograph.run/domain": "nvl72-a"}, SETTINGS.topology) == ()


def test_two_dgx_nodes_never_make_one_16_gpu_nvlink_domain():
    labels = {**filter_labels(DGX), "railforge.io/spine": "s0", "railforge.io/leaf": "l0"}
    annotations = {"railforge.io/topology-required": "nvlink"}
    view = run(
        [node("dgx-0", labels=labels), node("dgx-1", labels=labels)],
        [pod("g-0", group="g"), pod("g-1", group="g")],
        [podgroup("g", 2, annotations=annotations)],
    )
    decisions = Scheduler().decide(
        Snapshot(1e9, tuple(view.nodes), tuple(view.queues), tuple(view.pending), (), config=SETTINGS.policy)
    )
    assert decisions.binds == []
    assert decisions.reasons["ml/g"].startswith(
        "does not fit even with nothing running: needs 16 GPUs within one nvlink"
    )


def test_queue_of_a_gang_podgroup_then_pod_then_namespace_then_default():
    key = "railforge.io/queue"
    queues = [{"metadata": {"name": name}, "spec": {}} for name in ("from-group", "from-pod", "from-ns", "ann")]
    namespaces = [
        {"metadata": {"name": "ml", "labels": {key: "from-ns"}}},
        {"metadata": {"name": "annotated", "annotations": {key: "ann"}}},
        {"metadata": {"name": "plain"}},
    ]
    view = run(
        [node("n0")],
        [
            pod("a-0", group="a", labels={key: "from-pod"}),
            pod("b-0", labels={key: "from-pod"}),
            pod("c-0"),
            pod("d-0", namespace="annotated"),
            pod("e-0", namespace="plain"),
        ],
        [podgroup("a", 1, labels={key: "from-group"})],
        queues,
        namespaces,
    )
    assert {gang.name: gang.queue for gang in view.pending} == {
        "ml/a": "from-group",
        "ml/pod/b-0": "from-pod",
        "ml/pod/c-0": "from-ns",
        "annotated/pod/d-0": "ann",
        "plain/pod/e-0": "default",
    }


def test_queue_problems_leave_out_the_queue_and_its_children():
    objects = [
        {"metadata": {"name": "a"}, "spec": {"parentQueue": "b"}},
        {"metadata": {"name": "b"}, "spec": {"parentQueue": "a"}},
        {"metadata": {"name": "child-of-bad"}, "spec": {"parentQueue": "bad"}},
        {"metadata": {"name": "bad"}, "spec": {"resources": {"cpu": {"limit": "lots"}}}},
        {"metadata": {"name": "heavy"}, "spec": {"overQuotaWeight": -1}},
        {"metadata": {"name": "team"}, "spec": {"resources": {"nvidia.com/gpu": {"quota": 16, "limit": "32"}}}},
    ]
    queues, problems = queues_from(objects, "default")
    assert {q.name: (dict(q.quota), dict(q.limit)) for q in queues} == {
        "team": ({"nvidia.com/gpu": 16}, {"nvidia.com/gpu": 32}),
        "default": ({}, {}),
    }
    assert {p.name: p.message for p in problems} == {
        "bad": "spec.resources.limit[cpu]: 'lots' is not a quantity; expected a number with an optional suffix "
        "(500m, 16Gi, 1e3)",
        "heavy": "spec.overQuotaWeight is -1; expected a number >= 0",
        "a": "spec.parentQueue forms a cycle (a -> b -> a); expected a tree",
        "b": "spec.parentQueue forms a cycle (b -> a -> b); expected a tree",
        "child-of-bad": "spec.parentQueue of child-of-bad names 'bad', which is not a usable Queue",
    }


def test_pods_of_other_schedulers_take_their_share_of_a_node():
    other = pod("daemon", gpus=2)
    other["spec"]["nodeName"] = "n0"
    view = run([node("n0")], [], foreign=[other])
    assert view.nodes[0].allocatable["nvidia.com/gpu"] == 6
    assert view.nodes[0].allocatable["pods"] == 109


def test_bound_pods_make_a_running_gang_and_a_torn_bind_is_set_aside():
    bound = pod("r-0", group="r", annotations={"railforge.io/started-at": "100.0", "railforge.io/borrowed": "true"})
    bound["spec"]["nodeName"] = "n0"
    torn_bound = pod("t-0", group="t")
    torn_bound["spec"]["nodeName"] = "n0"
    plan = '{"uid-t-0":"n0","uid-t-1":"n1"}'
    view = run(
        [node("n0"), node("n1")],
        [bound, torn_bound, pod("t-1", group="t")],
        [podgroup("r", 1), podgroup("t", 2, annotations={"railforge.io/placement": plan})],
    )
    assert [(r.gang.name, dict(r.placement), r.start_time, r.borrowed) for r in view.running] == [
        ("ml/r", {"r-0": "n0"}, 100.0, True)
    ]
    assert [objects.name for objects in view.partial] == ["ml/t"]
    assert view.pending == []


@pytest.mark.parametrize(
    ("text", "seconds"), [("3600", 3600.0), ("1h30m", 5400.0), ("90s", 90.0), ("2h", 7200.0), ("0.5", 0.5)]
)
def test_runtime_annotations(text, seconds):
    assert runtime_seconds(text) == seconds


@pytest.mark.parametrize("text", ["soon", "", "0", "-5", "1d", "inf"])
def test_bad_runtime_annotations(text):
    with pytest.raises(ValueError, match="expected"):
        runtime_seconds(text)


def test_each_refusal_names_the_field_and_is_coded():
    view = run(
        [node("n0")],
        [
            pod("short-0", group="short"),
            pod("orphan-0", group="missing"),
            pod("lost-0", labels={"railforge.io/queue": "nowhere"}),
            pod("aff-0", annotations={"railforge.io/topology-required": "rack"}),
        ],
        [podgroup("short", 2)],
    )
    assert {name: (w.code, str(w)) for name, w in view.waiting.items()} == {
        "ml/short": (
            "input.min-member",
            "spec.minMember is 2 but fewer pods carry scheduling.x-k8s.io/pod-group=short; expected at least 2 "
            "(waiting for the rest)",
        ),
        "ml/missing": (
            "input.podgroup-missing",
            "label scheduling.x-k8s.io/pod-group names PodGroup.scheduling.x-k8s.io 'missing', which does not exist "
            "in ml",
        ),
        "ml/pod/lost-0": (
            "input.unknown-queue",
            "pod label railforge.io/queue names queue 'nowhere', which does not exist or is not usable",
        ),
        "ml/pod/aff-0": (
            "input.invalid",
            "annotation railforge.io/topology-required is 'rack'; expected one of the levels spine, leaf, nvlink",
        ),
    }
    assert view.pending == []


def test_gangs_on_nodes_outside_the_selection_are_left_alone():
    settings = settings_from_mapping({"node_selector": "pool=mine"})
    bound = pod("theirs-0", group="theirs")
    bound["spec"]["nodeName"] = "other"
    lost = pod("lost-0", group="lost")
    lost["spec"]["nodeName"] = "deleted-node"
    view = translate(
        [node("mine", labels={"pool": "mine"}), node("other")],
        [bound, lost],
        [],
        {
            (SCHEDULER_PLUGINS, "ml", "theirs"): podgroup("theirs", 1),
            (SCHEDULER_PLUGINS, "ml", "lost"): podgroup("lost", 1),
        },
        [],
        {},
        settings,
        now=1e9,
    )
    assert [n.name for n in view.nodes] == ["mine"]
    assert "ml/theirs" not in view.gangs  # not counted, never restarted
    # a node that is gone is lost: its gang stays, with the member failed, for the core to restart
    assert [(r.gang.name, r.failed_members) for r in view.running] == [("ml/lost", ("lost-0",))]


def unbindable(name: str, **spec) -> dict:
    member = pod(name, 4, group="job")
    member["spec"].update(spec)
    return member


@pytest.mark.parametrize(
    ("spec", "code", "words"),
    [
        ({"schedulingGates": [{"name": "example.com/quota"}]}, "gang.gated", "spec.schedulingGates example.com/quota"),
        ({"workloadRef": {"name": "w", "podGroup": "g"}}, "input.unsupported", "spec.workloadRef"),
    ],
)
def test_a_pod_the_scheduler_must_not_bind_keeps_its_whole_gang_waiting(spec, code, words):
    pods = [pod("job-0", 4, group="job"), unbindable("job-1", **spec), pod("other", 4)]
    out = run([node("n1")], pods, groups=[podgroup("job", 2)])
    assert [gang.name for gang in out.pending] == ["ml/pod/other"]  # the others are still decided
    waiting = out.waiting["ml/job"]
    assert waiting.code == code
    assert "pod job-1" in waiting and words in waiting and "the gang waits whole" in waiting
    # a gate is a normal wait; what the scheduler cannot do is a problem on the objects
    assert bool(out.problems) is code.startswith("input.")


def native_pod(name: str, group: str, gpus: int = 8) -> dict:
    member = pod(name, gpus)
    member["spec"]["schedulingGroup"] = {"podGroupName": group}
    return member


def native_group(name: str, policy: dict, **spec) -> dict:
    meta = {"name": name, "namespace": "ml", "uid": f"uid-native-{name}", "creationTimestamp": CREATED}
    return {"metadata": meta, "spec": {"schedulingPolicy": policy, **spec}}


def test_kubernetes_podgroups_are_gangs_beside_scheduler_plugins_ones_of_the_same_name():
    pods = [*(native_pod(f"n-{i}", "train") for i in range(3)), *(pod(f"p-{i}", group="train") for i in range(2))]
    out = run(
        [node("n1"), node("n2")],
        pods,
        groups=[podgroup("train", 2)],
        native_groups=[native_group("train", {"gang": {"minCount": 3}})],
    )
    gangs = {gang.name: gang for gang in out.pending}
    assert set(gangs) == {"ml/train", "ml/scheduling.k8s.io/train"}
    native = gangs["ml/scheduling.k8s.io/train"]
    assert (native.min_member, [m.name for m in native.members]) == (3, ["n-0", "n-1", "n-2"])
    assert out.gangs["ml/scheduling.k8s.io/train"].kind == "PodGroup.scheduling.k8s.io"
    assert gangs["ml/train"].min_member == 2 and not out.problems


@pytest.mark.parametrize(
    ("group", "code", "words"),
    [
        (
            native_group("train", {"gang": {"minCount": 4}}),
            "input.min-member",
            "spec.schedulingPolicy.gang.minCount is 4 but fewer pods carry spec.schedulingGroup.podGroupName=train",
        ),
        (None, "input.podgroup-missing", "names PodGroup.scheduling.k8s.io 'train', which does not exist in ml (or"),
        (
            native_group("train", {"gang": {"minCount": 3}}, schedulingConstraints={"topology": [{"key": "rack"}]}),
            "input.invalid",
            "spec.schedulingConstraints.topology key is 'rack'; expected a topology label: railforge.io/spine",
        ),
        (
            native_group("train", {"gang": {"minCount": 3}}, resourceClaims=[{"name": "imex"}]),
            "input.unsupported",
            "spec.resourceClaims is set",
        ),
    ],
)
def test_a_kubernetes_podgroup_that_cannot_be_scheduled_says_which_field(group, code, words):
    pods = [native_pod(f"n-{i}", "train") for i in range(3)]
    out = run([node("n1"), node("n2")], pods, native_groups=[group] if group else [])
    assert not out.pending
    assert out.waiting["ml/scheduling.k8s.io/train"].code == code
    assert words in out.waiting["ml/scheduling.k8s.io/train"]
    # the problem is the PodGroup's, or the first pod's when there is no PodGroup
    owner = "PodGroup.scheduling.k8s.io ml/train" if group else "Pod ml/n-0"
    assert [str(problem).split(":")[0] for problem in out.problems] == [owner]


def test_kubernetes_podgroup_topology_timeout_and_basic_policy_are_read():
    constrained = native_group(
        "train",
        {"gang": {"minCount": 2}},
        schedulingConstraints={"topology": [{"key": "fabric.topograph.run/tier-0"}]},
    )
    constrained["metadata"]["annotations"] = {"railforge.io/schedule-timeout": "5m"}
    loose = native_group("sweep", {"basic": {}})
    pods = [native_pod("t-0", "train"), native_pod("t-1", "train"), native_pod("s-0", "sweep", 1)]
    out = run([node("n1"), node("n2")], [*pods, native_pod("s-1", "sweep", 1)], native_groups=[constrained, loose])
    gangs = {gang.name: gang for gang in out.pending}
    train, sweep = gangs["ml/scheduling.k8s.io/train"], gangs["ml/scheduling.k8s.io/sweep"]
    assert (train.topology.level, train.topology.required, train.schedule_timeout) == ("leaf", True, 300.0)
    assert (sweep.min_member, len(sweep.members)) == (1, 2)  # basic: the pods need not start together


def test_pods_being_deleted_are_not_failed_members():
    failed = pod("job-0", 4, group="job", deletionTimestamp="2026-11-23T20:01:00Z")
    failed["spec"]["nodeName"] = "n1"
    failed["status"]["phase"] = "Failed"
    other = pod("job-1", 4, group="job")
    other["spec"]["nodeName"] = "n1"
    out = run([node("n1")], [failed, other], groups=[podgroup("job", 2)])
    assert [running.failed_members for running in out.running] == [()]
    failed["metadata"].pop("deletionTimestamp")
    out = run([node("n1")], [failed, other], groups=[podgroup("job", 2)])
    assert [running.failed_members for running in out.running] == [("job-0",)]


def test_the_ended_pods_a_failure_kept_are_evidence_not_members():
    """A failed gang keeps its ended pods (their logs): they fail it no second time. Its pods still leaving hold
    their nodes until gone; the pods its owner makes again wait as failed."""
    ended = pod("job-0", 4, group="job")
    ended["spec"]["nodeName"] = "n1"
    ended["status"]["phase"] = "Failed"
    leaving = pod("job-1", 4, group="job", deletionTimestamp="2026-11-23T20:01:00Z")
    leaving["spec"]["nodeName"] = "n1"
    leaving["status"]["phase"] = "Running"
    group = podgroup("job", 2, annotations={"railforge.io/failed": "member job-0 failed"})
    out = run([node("n1")], [ended, leaving], groups=[group])
    assert [(r.failed_members, sorted(r.placement)) for r in out.running] == [((), ["job-1"])]
    again = [pod(f"job-{i}", 4, group="job", uid=f"uid-again-{i}") for i in (1, 2)]
    out = run([node("n1")], [ended, *again], groups=[group])
    assert out.running == [] and out.pending == []
    assert out.waiting["ml/job"].code == "gang.failed"


def test_a_member_recreated_unbound_fails_its_running_gang_once():
    """A worker's node was lost and its pod deleted; the owner made a new one. The two still bound must not run short
    of it: the new pod counts as the gang's failed member (the core restarts the gang whole). Pods added beyond
    minMember wait, and a restart under way (pods being deleted) is not a new failure."""
    launcher, worker = pod("job-launcher", 0, group="job"), pod("job-worker-0", 4, group="job")
    for bound in (launcher, worker):
        bound["spec"]["nodeName"] = "n1"
    new = pod("job-worker-1", 4, group="job")
    out = run([node("n1")], [launcher, worker, new], groups=[podgroup("job", 3)])
    assert [(r.gang.name, r.failed_members) for r in out.running] == [("ml/job", ("job-worker-1",))]
    out = run([node("n1")], [launcher, worker, new], groups=[podgroup("job", 2)])  # an extra pod: it waits
    assert [r.failed_members for r in out.running] == [()]
    worker["metadata"]["deletionTimestamp"] = "2026-11-23T20:01:00Z"
    out = run([node("n1")], [launcher, worker, new], groups=[podgroup("job", 3)])
    assert [r.failed_members for r in out.running] == [()]


def test_a_gang_whose_member_succeeded_is_ending_so_the_gang_waiting_for_it_is_reserved_there():
    """Gang a holds both nodes; b (the whole pool, earlier) and c (4 GPUs, later) wait. Nothing says when a ends,
    so nothing can be reserved and c may start anywhere a frees. Once one of a's pods has succeeded, a is ending: b is
    reserved on a's nodes from now, and c may not take half of them (it would hold b back for its whole run)."""
    running = [pod(f"a-{i}", group="a", annotations={"railforge.io/started-at": "100.0"}) for i in range(2)]
    for member, name in zip(running, ("n0", "n1"), strict=True):
        member["spec"]["nodeName"] = name
        member["status"]["phase"] = "Running"
    waiting = [pod("b-0", group="b"), pod("b-1", group="b"), pod("c-0", 4, group="c")]
    waiting[2]["metadata"]["creationTimestamp"] = "2026-11-23T20:00:05Z"
    groups = {
        (SCHEDULER_PLUGINS, "ml", name): podgroup(name, members) for name, members in (("a", 2), ("b", 2), ("c", 1))
    }

    def decide(now: float):
        view = translate([node("n0"), node("n1")], [*running, *waiting], [], groups, [], {}, SETTINGS, now)
        snapshot = Snapshot(now, tuple(view.nodes), tuple(view.queues), tuple(view.pending), tuple(view.running),
                            config=SETTINGS.policy)  # fmt: skip
        return view, Scheduler().decide(snapshot)

    view, decisions = decide(1e9)
    assert [r.expected_end for r in view.running] == [math.inf]
    assert decisions.binds == [] and decisions.reservations == []

    running[0]["status"]["phase"] = "Succeeded"  # n0 is free; a-1 still runs on n1
    view, decisions = decide(1e9 + 1)
    assert [(dict(r.placement), r.expected_end) for r in view.running] == [({"a-1": "n1"}, 1e9 + 1)]
    assert decisions.binds == []
    assert [(r.gang_name, r.start, sorted({node for _, node in r.placement})) for r in decisions.reservations] == [
        ("ml/b", 1e9 + 1, ["n0", "n1"])
    ]


def test_a_node_annotated_for_maintenance_is_held_from_that_time_and_a_bad_time_is_refused():
    held, bad = node("held"), node("bad")
    held["metadata"]["annotations"] = {"railforge.io/maintenance-from": "2026-12-01T02:00:00Z"}
    bad["metadata"]["annotations"] = {"railforge.io/maintenance-from": "tomorrow"}
    out = run([held, bad, node("free")], [])
    assert {n.name: n.maintenance_from for n in out.nodes} == {"held": 1796090400.0, "free": None}
    assert [str(problem) for problem in out.problems] == [
        "Node bad: annotation railforge.io/maintenance-from is 'tomorrow'; expected a time as 2026-12-01T02:00:00Z"
    ]


@pytest.mark.parametrize(
    ("nodes", "until", "kept_off"),
    [
        (["n1", "n2"], 1e9 + 60, ("n1",)),  # another node can hold it: it keeps off n1
        (["n1"], 1e9 + 60, None),  # nowhere else could it ever start: it falls back to n1
        (["n1", "n2"], 1e9 - 1, None),  # the time is up
    ],
)
def test_a_restarted_gang_keeps_off_the_nodes_where_its_start_failed_while_it_can(nodes, until, kept_off):
    annotations = {"railforge.io/avoid-nodes": json.dumps({"nodes": ["n1"], "until": until})}
    group = podgroup("job", 1, annotations=annotations)
    hosts = [node(name, labels={"kubernetes.io/hostname": name}) for name in nodes]
    assert_kept_off(run(hosts, [pod("job-0", 8, group="job")], groups=[group]), kept_off)


def assert_kept_off(out, kept_off: tuple[str, ...] | None) -> None:
    """The one pending gang keeps off ``kept_off`` by a required node affinity, or (None) falls back."""
    (gang,) = out.pending
    rules = [(rule.key, rule.operator, rule.values) for rule in gang.affinity]
    if kept_off is None:
        assert rules == [] and not out.avoiding
    else:
        assert rules == [("kubernetes.io/hostname", "NotIn", kept_off)]
        assert out.avoiding["ml/job"].nodes == kept_off


@pytest.mark.parametrize(("workers", "kept_off"), [(["n0", "n1"], None), (["n0", "n1", "n2"], ("n1",))])
def test_a_restarted_gang_falls_back_when_its_pods_kept_apart_could_never_start_elsewhere(workers, kept_off):
    """The lab's shape: two pods that must be on distinct nodes; the control plane's taint rules it out. With one
    other worker they could never start off n1: the gang falls back to it at once; with two it keeps off n1."""
    annotations = {"railforge.io/avoid-nodes": json.dumps({"nodes": ["n1"], "until": 1e9 + 60})}
    group = podgroup("job", 2, annotations=annotations)
    control_plane = node("cp", 0, labels={"kubernetes.io/hostname": "cp"})
    control_plane["spec"]["taints"] = [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
    hosts = [control_plane, *(node(name, labels={"kubernetes.io/hostname": name}) for name in workers)]
    apart = {"matchLabels": {"scheduling.x-k8s.io/pod-group": "job"}}
    term = {"labelSelector": apart, "topologyKey": "kubernetes.io/hostname"}
    pods = [pod(f"job-{i}", 1, group="job") for i in range(2)]
    for each in pods:
        each["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    assert_kept_off(run(hosts, pods, groups=[group]), kept_off)


def job(name: str, **spec) -> dict:
    return {"metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"}, "spec": spec}


def owned_by(kind: str, name: str) -> dict:
    return {"ownerReferences": [{"kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}]}


@pytest.mark.parametrize(
    "spec, allowed",
    [
        ({"backoffLimit": 0}, 0),  # deploy/openmpi's MPIJob: runPolicy.backoffLimit 0 on its launcher's Job
        ({"backoffLimit": 3}, 1),  # the Job's 2 pods: 2 removals a restart
        ({}, 3),  # the Job's default limit of 6
        ({"backoffLimit": 6, "backoffLimitPerIndex": 1}, 1),  # each index counts its own
    ],
    ids=["mpijob-launcher-0", "shared-limit", "default-limit", "per-index"],
)
def test_the_jobs_owning_a_gangs_pods_bound_its_restarts(spec, allowed):
    """A restart removes every pod; each Job counts its own removed pods against its limit: the gang may restart as
    often as the tightest of its Jobs allows. A pod of no Job's (an MPIJob's worker) adds no limit."""
    launcher = pod("ring-launcher", 0, "ring", **owned_by("Job", "ring-launcher"))
    workers = [pod(f"ring-worker-{i}", 8, "ring", **owned_by("MPIJob", "ring")) for i in range(2)]
    indexed = [pod(f"train-{i}", 8, "train", **owned_by("Job", "train")) for i in range(2)]
    jobs = [job("ring-launcher", backoffLimit=spec.get("backoffLimit", 6)), job("train", **spec)]
    groups = [podgroup("ring", 3), podgroup("train", 2)]
    view = run([node("n0"), node("n1")], [launcher, *workers, *indexed], groups, jobs=jobs)
    by_name = {gang.name: gang for gang in view.pending}
    launcher_limit = spec.get("backoffLimit", 6)
    assert by_name["ml/ring"].owner_max_restarts == launcher_limit
    assert by_name["ml/train"].owner_max_restarts == allowed
    lone = run([node("n0")], [pod("alone", 1)], jobs=jobs).pending[0]
    assert lone.owner_max_restarts is None


TRACKED = {"finalizers": ["batch.kubernetes.io/job-tracking"]}  # a Job's pod it has not counted yet


@pytest.mark.parametrize(
    "backoff_limit, status, failed_meta, allowed",
    [
        (1, {}, TRACKED, 1),  # not counted yet: the failed pod and the removed one make 2 > 1 (1 restart done)
        (1, {"failed": 1}, {}, 1),  # the same, once the Job counted the failed pod
        (1, {"uncountedTerminatedPods": {"failed": ["uid-train-0"]}}, {}, 1),  # ... while it counts it
        (4, {"failed": 1}, {}, 3),  # 1 + 1 of 4 now, 2 a restart after: room for two more
        (6, {"failed": 6}, {}, 1),  # six failures the Job counted (a launcher it retried itself) leave none
    ],
    ids=["uncounted", "counted", "counting", "room", "spent-by-the-job"],
)
def test_what_a_job_counted_already_bounds_the_restarts_left(backoff_limit, status, failed_meta, allowed):
    """A running gang of one restart so far, one of its Job's two pods failed: the owner's failures counted (its
    ``status``) or still to count (the tracking finalizer) and the removal of the other come before any further
    restart."""
    failed, running = (pod(f"train-{i}", 8, "train", **owned_by("Job", "train")) for i in range(2))
    failed["metadata"].update(failed_meta)
    for member, phase in ((failed, "Failed"), (running, "Running")):
        member["spec"]["nodeName"], member["status"]["phase"] = "n0", phase
    group = podgroup("train", 2, annotations={"railforge.io/restarts": "1"})
    train = {**job("train", backoffLimit=backoff_limit), "status": status}
    view = run([node("n0", gpus=16)], [failed, running], [group], jobs=[train])
    (gang,) = [r.gang for r in view.running]
    assert (gang.restart_count, gang.owner_max_restarts) == (1, allowed)


def ended(exit_code: int, *conditions: str, container: str = "worker") -> dict:
    """A failed pod's status as the informer keeps it: its container's end and its conditions (True)."""
    return {
        "phase": "Failed",
        "containerStatuses": [{"name": container, "state": {"terminated": {"exitCode": exit_code}}}],
        "conditions": [{"type": condition, "status": "True"} for condition in conditions],
    }


EXIT_42_FAILS = {"action": "FailJob", "onExitCodes": {"containerName": "worker", "operator": "In", "values": [42]}}
DISRUPTION_IGNORED = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}


@pytest.mark.parametrize(
    "rules, status, action",
    [
        ([EXIT_42_FAILS, DISRUPTION_IGNORED], ended(42), "FailJob"),
        ([EXIT_42_FAILS, DISRUPTION_IGNORED], ended(3), "Count"),  # no rule met
        ([EXIT_42_FAILS, DISRUPTION_IGNORED], ended(42, container="sidecar"), "Count"),  # another container
        ([DISRUPTION_IGNORED, EXIT_42_FAILS], ended(42, "DisruptionTarget"), "Ignore"),  # the first rule met
        ([{"action": "FailIndex", "onExitCodes": {"operator": "NotIn", "values": [1, 2]}}], ended(3), "FailIndex"),
        ([{"action": "FailIndex", "onExitCodes": {"operator": "NotIn", "values": [1, 2]}}], ended(2), "Count"),
        ([{"action": "Later", "onExitCodes": {"operator": "In", "values": [3]}}], ended(3), "Count"),  # unknown
        ([], ended(3), "Count"),
    ],
)
def test_a_failed_pod_meets_the_first_rule_of_its_jobs_failure_policy(rules, status, action):
    failed = {**pod("train-0"), "status": status}
    assert failure_action(job("train", podFailurePolicy={"rules": rules}), failed) == action


@pytest.mark.parametrize(
    "rule, allowed, why",
    [
        # the Job fails itself on it: nothing is restarted, its pods are kept to read
        (EXIT_42_FAILS, 0, "Job train's podFailurePolicy ends the job on pod train-0 (FailJob)"),
        # its index is not made again
        ({**EXIT_42_FAILS, "action": "FailIndex"}, 0, "Job train's podFailurePolicy ends the pod's index on pod "
         "train-0 (FailIndex)"),
        ({**EXIT_42_FAILS, "action": "Ignore"}, 2, ""),  # not counted: the removed pod alone counts (1 + 1 of 3)
        ({**EXIT_42_FAILS, "action": "Count"}, 1, ""),  # counted: 2 of 3 now, then 2 a restart
    ],
)  # fmt: skip
def test_a_jobs_failure_policy_decides_whether_its_failed_pod_leaves_a_restart(rule, allowed, why):
    """One of the Job's two pods exited 42, not counted yet (the tracking finalizer); backoffLimit 3."""
    failed, running = (pod(f"train-{i}", 8, "train", **owned_by("Job", "train")) for i in range(2))
    failed["metadata"].update(TRACKED)
    failed["status"] = ended(42)
    running["status"]["phase"] = "Running"
    for member in (failed, running):
        member["spec"]["nodeName"] = "n0"
    train = job("train", backoffLimit=3, podFailurePolicy={"rules": [rule]})
    view = run([node("n0", gpus=16)], [failed, running], [podgroup("train", 2)], jobs=[train])
    (gang,) = [r.gang for r in view.running]
    assert (gang.owner_max_restarts, gang.owner_limit_reason) == (allowed, why)


def test_each_index_counts_its_own_failures_against_its_limit():
    """backoffLimitPerIndex: each restart costs every index one; an index whose pod says it failed once already
    leaves one restart of two."""
    pods = [pod(f"train-{i}", 8, "train", **owned_by("Job", "train")) for i in range(2)]
    pods[1]["metadata"]["annotations"] = {"batch.kubernetes.io/job-index-failure-count": "1"}
    view = run([node("n0"), node("n1")], pods, [podgroup("train", 2)], jobs=[job("train", backoffLimitPerIndex=2)])
    assert view.pending[0].owner_max_restarts == 1


# -- reuse between passes ---------------------------------------------------------------------------------------


def _changed(obj: dict, rng, changes) -> dict:
    """A copy of ``obj`` with one of ``changes`` (functions of the copy and ``rng``) applied: what a watch event
    hands the informer in place of the object it had."""
    copy = json.loads(json.dumps(obj))
    rng.choice(changes)(copy, rng)
    return copy


def _set_gpus(p, rng):
    p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = str(rng.choice((1, 2, 4, 8)))


def _set_runtime(p, rng):
    p["metadata"].setdefault("annotations", {})["railforge.io/runtime"] = str(rng.choice((600, 3600)))


def _set_priority(p, rng):
    p["spec"]["priority"] = rng.choice((0, 10))


def _pin(p, rng):
    p["spec"]["nodeSelector"] = {"kubernetes.io/hostname": f"h{rng.randrange(4)}"}


def _bind(p, rng):
    p["spec"]["nodeName"] = f"n{rng.randrange(4)}"
    p["status"]["phase"] = "Running"
    if rng.random() < 0.7:  # as the scheduler binds; else by hand, its start unknown
        p["metadata"].setdefault("annotations", {})["railforge.io/started-at"] = "999999000.0"


def _queue(p, rng):
    p["metadata"]["labels"]["railforge.io/queue"] = rng.choice(("team", "gone"))


def _anti_affinity(p, rng):
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
    p["metadata"]["labels"]["app"] = "x"
    p["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def _affinity(p, rng):
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
    p["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def _label(p, rng):
    p["metadata"]["labels"]["app"] = rng.choice(("x", "y"))


def _avoid(g, rng):
    until = rng.choice((1e9 - 1, 1e9 + 600))  # run at now=1e9: lapsed, or still kept off
    g["metadata"].setdefault("annotations", {})["railforge.io/avoid-nodes"] = json.dumps(
        {"nodes": ["n0"], "until": until}
    )


def _namespace_queue(n, rng):
    n["metadata"]["labels"] = {"railforge.io/queue": rng.choice(("team", "default"))}


def _queue_weight(q, rng):
    q["spec"]["overQuotaWeight"] = rng.choice((1, 2))


def _min_member(g, rng):
    g["spec"]["minMember"] = rng.choice((1, 2, 3))


def _relabel(n, rng):
    n["metadata"]["labels"] = {
        "kubernetes.io/hostname": n["metadata"]["labels"]["kubernetes.io/hostname"],
        "railforge.io/leaf": f"l{rng.randrange(2)}",
    }


def _resize(n, rng):
    n["status"]["allocatable"]["nvidia.com/gpu"] = str(rng.choice((4, 8)))


def _not_ready(n, rng):
    n["status"]["conditions"] = [{"type": "Ready", "status": rng.choice(("True", "False"))}]


def _job_limit(j, rng):
    j["spec"]["backoffLimit"] = rng.choice((0, 1, 6))


@pytest.mark.parametrize("seed", range(40))
def test_translation_reused_between_passes_equals_a_full_rebuild(seed):
    """Passes over objects that change a few at a time, as the informers hand them over: a translation that reuses
    the last pass's Nodes and Gangs (``TranslationCache``) equals one that builds every one, and does reuse them."""
    rng = random.Random(seed)
    nodes = [node(f"n{i}", labels={"kubernetes.io/hostname": f"h{i}", "railforge.io/leaf": "l0"}) for i in range(4)]
    groups = [podgroup(f"g{i}", 2) for i in range(3)]
    jobs = [job(f"j{i}", backoffLimit=3) for i in range(2)]
    pods = [pod(f"g{i}-{m}", 2, group=f"g{i}", **owned_by("Job", f"j{i % 2}")) for i in range(3) for m in range(2)]
    pods += [pod(f"lone{i}", rng.choice((1, 8))) for i in range(4)]
    foreign = [pod("other", 2)]
    foreign[0]["spec"]["nodeName"] = "n0"
    namespaces = [{"metadata": {"name": "ml", "labels": {}}}]
    queues = [{"metadata": {"name": "team"}, "spec": {}}]
    cache = TranslationCache()
    reused = 0
    previous = None
    for _ in range(12):
        for objects, changes in (
            (
                pods,
                (_set_gpus, _set_runtime, _set_priority, _pin, _bind, _bind, _queue, _anti_affinity, _affinity, _label),
            ),
            (groups, (_min_member, _avoid)),
            (nodes, (_relabel, _resize, _not_ready)),
            (jobs, (_job_limit,)),
            (foreign, (_set_gpus,)),
            (namespaces, (_namespace_queue,)),
            (queues, (_queue_weight,)),
        ):
            for index in rng.sample(range(len(objects)), k=rng.randrange(min(len(objects), 2) + 1)):
                objects[index] = _changed(objects[index], rng, changes)
        if rng.random() < 0.2:
            pods.pop(rng.randrange(len(pods)))
        if rng.random() < 0.2:
            pods.append(pod(f"new{rng.randrange(10**6)}", rng.choice((1, 2))))
        if rng.random() < 0.2:
            queues[:] = [] if queues else [{"metadata": {"name": "team"}, "spec": {}}]
        grouped = {(SCHEDULER_PLUGINS, g["metadata"]["namespace"], g["metadata"]["name"]): g for g in groups}
        named = {n["metadata"]["name"]: n for n in namespaces}
        args = (nodes, pods, foreign, grouped, queues, named, SETTINGS, 1e9, jobs)
        fresh, kept = translate(*args), translate(*args, cache=cache)
        for field in ("nodes", "pending", "running", "waiting", "problems", "avoiding", "partial"):
            assert getattr(kept, field) == getattr(fresh, field), field
        assert {name: g.queue for name, g in kept.gangs.items()} == {name: g.queue for name, g in fresh.gangs.items()}
        if previous is not None:
            before = {id(gang) for gang in (*previous.pending, *(r.gang for r in previous.running))}
            before |= {id(n) for n in previous.nodes}
            now = [*kept.pending, *(r.gang for r in kept.running), *kept.nodes]
            reused += sum(id(item) in before for item in now)
        previous = kept
    assert reused > 0


def test_an_unchanged_gang_is_not_translated_again():
    """A running gang whose objects are the same is the same RunningGang the next pass; its node going not ready
    makes its member failed in the pass that sees it."""
    nodes = [node("n0", labels={"kubernetes.io/hostname": "h0"})]
    bound = pod("a", 8, annotations={"railforge.io/started-at": "999999000.0"})
    bound["spec"]["nodeName"], bound["status"]["phase"] = "n0", "Running"
    waiting = pod("b", 8)
    cache = TranslationCache()

    def translated():
        return translate(nodes, [bound, waiting], (), {}, (), {}, SETTINGS, 1e9, cache=cache)

    first, second = translated(), translated()
    assert second.running[0] is first.running[0] and second.pending[0] is first.pending[0]
    nodes[0] = json.loads(json.dumps(nodes[0]))
    nodes[0]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    assert translated().running[0].failed_members == ("a",)


def test_a_gang_placed_by_other_pods_is_translated_when_they_change():
    """A waiting pod's pod affinity reads the bound pods: their labels changing changes it, its own objects alike."""
    nodes = [node("n0", labels={"kubernetes.io/hostname": "h0"}), node("n1", labels={"kubernetes.io/hostname": "h1"})]
    bound = pod("a", 1, labels={"app": "y"}, annotations={"railforge.io/started-at": "999999000.0"})
    bound["spec"]["nodeName"], bound["status"]["phase"] = "n0", "Running"
    waiting = pod("b", 1)
    _affinity(waiting, None)
    cache = TranslationCache()

    def translated():
        return translate(nodes, [bound, waiting], (), {}, (), {}, SETTINGS, 1e9, cache=cache)

    assert translated().waiting["ml/pod/b"].code == "gang.affinity"
    bound = json.loads(json.dumps(bound))
    bound["metadata"]["labels"]["app"] = "x"
    assert "ml/pod/b" not in translated().waiting
