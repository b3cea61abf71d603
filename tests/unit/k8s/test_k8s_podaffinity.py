"""Pod affinity, anti-affinity and topology spread read from pods and honoured by the core: spreads within a
gang, node rules against bound pods, and the forms that keep a gang waiting with the field named."""

import pytest
from test_k8s_translate import node, pod, podgroup, run

from railforge.k8s import podaffinity
from railforge.scheduler import Scheduler, Snapshot

HOST = "kubernetes.io/hostname"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def hosts(count: int, gpus: int = 8, zone_of=lambda i: "z0") -> list[dict]:
    return [node(f"n{i}", gpus, {HOST: f"n{i}", "zone": zone_of(i)}) for i in range(count)]


def term(key: str = HOST, **match) -> dict:
    return {"labelSelector": {"matchLabels": match}, "topologyKey": key}


def mpi_job(name: str, workers: int, gpus: int, worker_spec: dict) -> list[dict]:
    """An MPIJob's pods: a launcher of no GPUs, workers labelled role=worker carrying ``worker_spec``."""
    launcher = pod(f"{name}-launcher", 0, group=name, labels={"job": name, "role": "launcher"})
    workers_ = [
        pod(f"{name}-worker-{i}", gpus, group=name, labels={"job": name, "role": "worker"}) for i in range(workers)
    ]
    for worker in workers_:
        worker["spec"].update(worker_spec)
    return [launcher, *workers_]


def placed(nodes, pods, foreign=(), groups=()):
    out = run(nodes, pods, groups=groups, foreign=foreign)
    decisions = Scheduler().decide(Snapshot(1e9, tuple(out.nodes), tuple(out.queues), tuple(out.pending), ()))
    return out, decisions


def anti(*terms, preferred=False) -> dict:
    if preferred:
        return {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "podAffinityTerm": t} for t in terms
                ]
            }
        }
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def workers_on(decisions) -> list[str]:
    (bind,) = decisions.binds
    return [node for member, node in bind.placement.items() if "worker" in member]


def test_workers_with_required_anti_affinity_land_on_distinct_nodes():
    pods = mpi_job("j", 3, 2, {"affinity": anti(term(job="j", role="worker"))})
    out, decisions = placed(hosts(4), pods, groups=[podgroup("j", 4)])
    assert len(set(workers_on(decisions))) == 3
    (gang,) = out.pending
    assert gang.spreads[0].source == f"spec.affinity.podAntiAffinity on {HOST}"


def test_workers_that_cannot_spread_wait_with_the_reason():
    pods = mpi_job("j", 3, 2, {"affinity": anti(term(job="j", role="worker"))})
    _, decisions = placed(hosts(2), pods, groups=[podgroup("j", 4)])
    assert not decisions.binds
    assert "needs 3 pods at most 1 per node (spec.affinity.podAntiAffinity on kubernetes.io/hostname)" in str(
        decisions.reasons["ml/j"]
    )


def test_preferred_anti_affinity_spreads_when_it_can_and_packs_when_it_cannot():
    spec = {"affinity": anti(term(job="j", role="worker"), preferred=True)}
    _, wide = placed(hosts(3), mpi_job("j", 3, 2, spec), groups=[podgroup("j", 4)])
    assert len(set(workers_on(wide))) == 3
    _, narrow = placed(hosts(1), mpi_job("j", 3, 2, spec), groups=[podgroup("j", 4)])
    assert set(workers_on(narrow)) == {"n0"}


def test_topology_spread_on_hostname_counts_the_pods_already_bound():
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": HOST,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    }
    old = pod("old", 0, labels={"app": "web"})
    old["spec"]["nodeName"] = "n0"
    old["status"]["phase"] = "Running"
    new = [pod(f"web-{i}", 0, group="web", labels={"app": "web"}) for i in range(2)]
    for p in new:
        p["spec"].update(spread)
    _, decisions = placed(hosts(3), new, foreign=[old], groups=[podgroup("web", 2)])
    assert sorted(decisions.binds[0].placement.values()) == ["n1", "n2"]


def test_anti_affinity_to_a_bound_pod_keeps_the_gang_out_of_its_zone():
    other = pod("db", 0, labels={"app": "db"})
    other["spec"]["nodeName"] = "n0"
    other["status"]["phase"] = "Running"
    gang = [pod("t-0", 1, group="t"), pod("t-1", 1, group="t")]
    for p in gang:
        p["spec"]["affinity"] = anti(term("zone", app="db"))
    nodes = hosts(4, zone_of=lambda i: f"z{i // 2}")
    _, decisions = placed(nodes, gang, foreign=[other], groups=[podgroup("t", 2)])
    assert set(decisions.binds[0].placement.values()) <= {"n2", "n3"}


def test_a_bound_pods_own_anti_affinity_keeps_pods_it_names_away():
    guard = pod("guard", 0, labels={"app": "guard"})
    guard["spec"].update(nodeName="n0", affinity=anti(term(HOST, team="x")))
    guard["status"]["phase"] = "Running"
    gang = [pod("x-0", 8, group="x", labels={"team": "x"})]
    _, decisions = placed(hosts(2), gang, foreign=[guard], groups=[podgroup("x", 1)])
    assert decisions.binds[0].placement == {"x-0": "n1"}


@pytest.mark.parametrize(
    "guarding",
    [
        # matchLabelKeys: the bound pod keeps away the pods carrying its own value of the key
        {"labelSelector": {"matchLabels": {}}, "matchLabelKeys": ["team"], "topologyKey": HOST},
        # a namespaceSelector (namespaces by their labels, not read): taken as every namespace
        {**term(HOST, team="x"), "namespaceSelector": {"matchLabels": {"kind": "batch"}}},
    ],
)
def test_a_bound_pods_anti_affinity_in_forms_not_read_elsewhere_still_keeps_pods_away(guarding):
    guard = pod("guard", 0, labels={"app": "guard", "team": "x"})
    guard["spec"].update(nodeName="n0", affinity=anti(guarding))
    guard["status"]["phase"] = "Running"
    gang = [pod("x-0", 8, group="x", labels={"team": "x"})]
    _, decisions = placed(hosts(2), gang, foreign=[guard], groups=[podgroup("x", 1)])
    assert decisions.binds[0].placement == {"x-0": "n1"}
    # another team's pod is not named by the folded key: it may go beside the guard
    other = [pod("y-0", 8, group="y", labels={"team": "y"})]
    _, decisions = placed(hosts(1), other, foreign=[guard], groups=[podgroup("y", 1)])
    assert decisions.binds[0].placement == {"y-0": "n0"}


def test_match_label_keys_keep_a_gang_apart_from_pods_of_its_own_value_only():
    """Workers avoid the pods of their own job (matchLabelKeys: job), not another job's with the same labels."""
    apart = {"labelSelector": {"matchLabels": {"role": "worker"}}, "matchLabelKeys": ["job"], "topologyKey": HOST}
    other = pod("k-worker-0", 0, labels={"job": "k", "role": "worker"})
    other["spec"]["nodeName"] = "n0"
    other["status"]["phase"] = "Running"
    out, decisions = placed(hosts(2), mpi_job("j", 2, 8, {"affinity": anti(apart)}), foreign=[other],
                            groups=[podgroup("j", 3)])  # fmt: skip
    assert sorted(workers_on(decisions)) == ["n0", "n1"]  # job k's worker on n0 is not avoided
    (gang,) = out.pending
    assert gang.spreads[0].source == f"spec.affinity.podAntiAffinity on {HOST}"


def test_required_affinity_joins_the_zone_of_a_bound_pod():
    cache = pod("cache", 0, labels={"app": "cache"})
    cache["spec"]["nodeName"] = "n3"
    cache["status"]["phase"] = "Running"
    gang = [pod("t-0", 1, group="t")]
    gang[0]["spec"]["affinity"] = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("zone", app="cache")]}
    }
    _, decisions = placed(hosts(4, zone_of=lambda i: f"z{i // 2}"), gang, foreign=[cache], groups=[podgroup("t", 1)])
    assert decisions.binds[0].placement["t-0"] in {"n2", "n3"}


def bound(name: str, node_name: str, **labels) -> dict:
    other = pod(name, 0, labels=labels)
    other["spec"]["nodeName"] = node_name
    other["status"]["phase"] = "Running"
    return other


def zones(gpus_by_node: list[int]) -> list[dict]:
    """Nodes n0.. in zones of two (z0: n0, n1; z1: n2, n3 ...) with the GPUs given."""
    return [node(f"n{i}", gpus, {HOST: f"n{i}", "zone": f"z{i // 2}"}) for i, gpus in enumerate(gpus_by_node)]


def preferring(affinity: dict, gpus: int = 8) -> list[dict]:
    gang = [pod("t-0", gpus, group="t")]
    gang[0]["spec"]["affinity"] = affinity
    return gang


@pytest.mark.parametrize("key", [HOST, "zone"])
def test_preferred_anti_affinity_to_a_bound_pod_is_kept_when_some_node_allows_it(key):
    """Weighed, never required: the gang goes elsewhere while there is room elsewhere, beside the pod when not."""
    db = bound("db", "n0", app="db")
    rule = anti(term(key, app="db"), preferred=True)
    _, plain = placed(zones([8, 8, 8, 8]), preferring({}), foreign=[db], groups=[podgroup("t", 1)])
    assert plain.binds[0].placement == {"t-0": "n0"}  # what it would take otherwise
    _, kept = placed(zones([8, 8, 8, 8]), preferring(rule), foreign=[db], groups=[podgroup("t", 1)])
    assert kept.binds[0].placement["t-0"] in ({"n1", "n2", "n3"} if key == HOST else {"n2", "n3"})
    _, beside = placed(zones([8, 8, 2, 2]), preferring(rule), foreign=[db], groups=[podgroup("t", 1)])
    assert beside.binds[0].placement["t-0"] in ({"n0", "n1"} if key == "zone" else {"n1"})
    _, only = placed(zones([8, 2, 2, 2]), preferring(rule), foreign=[db], groups=[podgroup("t", 1)])
    assert only.binds[0].placement == {"t-0": "n0"}


def test_preferred_affinity_joins_a_bound_pods_zone_when_it_has_room_and_goes_elsewhere_when_not():
    cache = bound("cache", "n3", app="cache")
    rule = {"podAffinity": {PREFERRED: [{"weight": 50, "podAffinityTerm": term("zone", app="cache")}]}}
    _, joined = placed(zones([8, 8, 8, 8]), preferring(rule), foreign=[cache], groups=[podgroup("t", 1)])
    assert joined.binds[0].placement["t-0"] in {"n2", "n3"}
    _, elsewhere = placed(zones([8, 8, 2, 2]), preferring(rule), foreign=[cache], groups=[podgroup("t", 1)])
    assert elsewhere.binds[0].placement["t-0"] in {"n0", "n1"}
    # no bound pod matches: nothing to prefer, the gang is placed as without it
    lonely = {"podAffinity": {PREFERRED: [{"weight": 50, "podAffinityTerm": term("zone", app="none")}]}}
    _, placed_anyway = placed(zones([8, 8, 8, 8]), preferring(lonely), foreign=[cache], groups=[podgroup("t", 1)])
    assert placed_anyway.binds[0].placement == {"t-0": "n0"}


def test_schedule_anyway_on_a_wider_key_prefers_the_domains_that_keep_the_skew():
    web = [bound(f"web-{i}", "n0", app="web") for i in range(2)]
    gang = [pod("t-0", 1, group="t", labels={"app": "web"})]
    gang[0]["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": term(app="web")["labelSelector"],
        }
    ]
    _, kept = placed(zones([8, 8, 8, 8]), gang, foreign=web, groups=[podgroup("t", 1)])
    assert kept.binds[0].placement["t-0"] in {"n2", "n3"}
    _, anyway = placed(zones([8, 8, 0, 0]), gang, foreign=web, groups=[podgroup("t", 1)])
    assert anyway.binds[0].placement["t-0"] in {"n0", "n1"}


@pytest.mark.parametrize(
    ("affinity", "code", "words"),
    [
        (
            {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("zone", app="none")]}},
            "gang.affinity",
            "no bound pod matches it yet",
        ),
        (
            {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        term(HOST, job="j", role="worker"),
                        term("zone", job="j", role="worker"),
                    ]
                }
            },
            "input.unsupported",
            "beside another term on kubernetes.io/hostname; expected one topology key",
        ),
        (
            anti({**term(job="j"), "namespaceSelector": {"matchLabels": {"team": "a"}}}),
            "input.unsupported",
            "non-empty namespaceSelector",
        ),
        (anti({**term(job="j"), "topologyKey": ""}), "input.invalid", "has no topologyKey"),
    ],
)
def test_forms_not_honoured_keep_the_gang_waiting_naming_pod_and_field(affinity, code, words):
    out = run(hosts(4), mpi_job("j", 2, 1, {"affinity": affinity}), groups=[podgroup("j", 3)])
    assert not out.pending
    waiting = out.waiting["ml/j"]
    assert waiting.code == code
    assert "pod j-worker-0: spec.affinity.pod" in str(waiting) and words in str(waiting)


def zone_spread(when: str = "DoNotSchedule", skew: int = 1) -> dict:
    constraint = {"maxSkew": skew, "topologyKey": "zone", "whenUnsatisfiable": when}
    return {"topologySpreadConstraints": [{**constraint, "labelSelector": {"matchLabels": {"role": "worker"}}}]}


def zones_of(decisions) -> list[str]:
    return sorted(f"z{int(node[1:]) // 2}" for node in workers_on(decisions))


def test_workers_kept_apart_on_a_wider_key_land_in_distinct_zones_or_wait_saying_so():
    spec = {"affinity": anti(term("zone", job="j", role="worker"))}
    out, two = placed(zones([8, 8, 8, 8]), mpi_job("j", 2, 1, spec), groups=[podgroup("j", 3)])
    assert zones_of(two) == ["z0", "z1"]  # both would fit on n0 alone
    assert out.pending[0].spreads[0].topology_key == "zone"
    _, three = placed(zones([8, 8, 8, 8]), mpi_job("j", 3, 1, spec), groups=[podgroup("j", 4)])
    assert not three.binds
    reason = str(three.reasons["ml/j"])
    assert "needs 3 pods at most 1 per zone domain (spec.affinity.podAntiAffinity on zone)" in reason, reason


def test_a_node_without_the_key_takes_any_number_of_pods_kept_apart_on_it():
    nodes = [*zones([8, 8]), node("n2", 8, {HOST: "n2"})]
    spec = {"affinity": anti(term("zone", job="j", role="worker"))}
    _, decisions = placed(nodes, mpi_job("j", 3, 4, spec), groups=[podgroup("j", 4)])  # n2 holds two
    on = workers_on(decisions)
    assert sum(node in ("n0", "n1") for node in on) == 1 and on.count("n2") == 2, on


def test_topology_spread_over_zones_keeps_the_skew_counting_bound_pods_and_skips_unlabelled_nodes():
    nodes = [*zones([8, 8, 8, 8]), node("n9", 8, {HOST: "n9"})]
    _, even = placed(nodes, mpi_job("j", 4, 1, zone_spread()), groups=[podgroup("j", 5)])
    assert zones_of(even) == ["z0", "z0", "z1", "z1"]  # several per zone, as kube-scheduler places them one by one
    # two workers of another job already in z0: both new ones go to z1, which evens the zones
    others = [bound(f"old-{i}", "n0", role="worker") for i in range(2)]
    _, evened = placed(nodes, mpi_job("j", 2, 1, zone_spread()), foreign=others, groups=[podgroup("j", 3)])
    assert zones_of(evened) == ["z1", "z1"]
    # z1 holds one of them only: one in each zone leaves z0 two ahead, both in z0 four
    small = [*zones([8, 8, 1, 0]), node("n9", 8, {HOST: "n9"})]
    _, skewed = placed(small, mpi_job("j", 2, 1, zone_spread()), foreign=others, groups=[podgroup("j", 3)])
    assert not skewed.binds
    reason = str(skewed.reasons["ml/j"])
    assert "at most 1 more in one zone domain than in another (spec.topologySpreadConstraints on zone)" in reason
    _, wider = placed(small, mpi_job("j", 2, 1, zone_spread(skew=2)), foreign=others, groups=[podgroup("j", 3)])
    assert zones_of(wider) == ["z0", "z1"]


def test_schedule_anyway_over_zones_spreads_the_gang_when_it_can_and_packs_when_it_cannot():
    job = mpi_job("j", 2, 1, zone_spread("ScheduleAnyway"))
    _, spread = placed(zones([8, 8, 8, 8]), job, groups=[podgroup("j", 3)])
    assert zones_of(spread) == ["z0", "z1"]
    _, packed = placed(zones([8, 8, 0, 0]), job, groups=[podgroup("j", 3)])
    assert zones_of(packed) == ["z0", "z0"]


def test_gangs_whose_pods_avoid_each_other_are_known_kept_apart_either_way():
    guard = pod("a-0", 1, group="a", labels={"app": "a"})
    guard["spec"]["affinity"] = anti(term(app="b"))
    plain = pod("b-0", 1, group="b", labels={"app": "b"})
    other = pod("c-0", 1, group="c", labels={"app": "c"})
    assert podaffinity.keeps_apart([guard]) and not podaffinity.keeps_apart([plain])
    assert podaffinity.kept_apart([guard], [plain]) and podaffinity.kept_apart([plain], [guard])
    assert not podaffinity.kept_apart([guard], [other]) and not podaffinity.kept_apart([plain], [other])
    # a namespaceSelector is not read: the term counts as naming pods of every namespace, never fewer
    wide = pod("d-0", 1, group="d", labels={"app": "d"})
    wide["spec"]["affinity"] = anti({**term(app="b"), "namespaceSelector": {"matchLabels": {"kind": "batch"}}})
    assert podaffinity.kept_apart([wide], [plain]) and not podaffinity.kept_apart([wide], [other])


def together(key: str, job: str) -> dict:
    return {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(key, job=job)]}}}


def test_workers_brought_together_share_one_zone_or_node_or_wait_saying_where_none_has_room():
    job = mpi_job("j", 4, 4, together("zone", "j"))
    job[0]["spec"].update(together("zone", "j"))  # the launcher too: the term names every pod of the gang
    out, decisions = placed(zones([8, 4, 8, 8]), job, groups=[podgroup("j", 5)])
    (bind,) = decisions.binds
    assert {f"z{int(node[1:]) // 2}" for node in bind.placement.values()} == {"z1"}  # z0 holds 12 of its 16 GPUs
    assert out.pending[0].together.topology_key == "zone"
    _, on_host = placed(zones([8, 16]), mpi_job("h", 3, 4, together(HOST, "h")), groups=[podgroup("h", 4)])
    assert set(on_host.binds[0].placement.values()) == {"n1"}
    _, never = placed(zones([8, 8, 8, 8]), mpi_job("w", 5, 4, together("zone", "w")), groups=[podgroup("w", 6)])
    assert not never.binds
    assert str(never.reasons["ml/w"]) == (
        "does not fit even with nothing running: needs 20 GPUs within one zone domain; the largest zone domain has "
        "16 in all"
    )


def test_a_spread_with_match_label_keys_spreads_each_jobs_pods_apart_from_its_own_only():
    spread = zone_spread()
    spread["topologySpreadConstraints"][0]["matchLabelKeys"] = ["job"]
    others = [bound(f"old-{i}", "n0", role="worker", job="other") for i in range(2)]  # another job's: not counted
    _, decisions = placed(zones([8, 8, 8, 8]), mpi_job("j", 2, 1, spread), foreign=others, groups=[podgroup("j", 3)])
    assert zones_of(decisions) == ["z0", "z1"]
    _, counted = placed(
        zones([8, 8, 8, 8]),
        mpi_job("j", 2, 1, spread),
        foreign=[bound(f"old-{i}", "n0", role="worker", job="j") for i in range(2)],
        groups=[podgroup("j", 3)],
    )
    assert zones_of(counted) == ["z1", "z1"]
