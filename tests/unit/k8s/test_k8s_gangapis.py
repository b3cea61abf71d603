"""The two PodGroup APIs: how a pod joins each, their minimum counts, and the status each says "scheduled" with."""

from railforge.k8s.gangapis import NATIVE, SCHEDULER_PLUGINS, joined


def group(status: dict | None = None, **spec) -> dict:
    return {"metadata": {"name": "train", "namespace": "ml", "generation": 2}, "spec": spec, "status": status or {}}


def test_a_pod_joins_by_label_or_by_field_and_the_label_comes_first():
    labelled = {"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "a"}}, "spec": {}}
    native = {"metadata": {}, "spec": {"schedulingGroup": {"podGroupName": "b"}}}
    both = {"metadata": labelled["metadata"], "spec": native["spec"]}
    assert joined(labelled) == (SCHEDULER_PLUGINS, "a")
    assert joined(native) == (NATIVE, "b")
    assert joined(both) == (SCHEDULER_PLUGINS, "a")
    assert joined({"metadata": {}, "spec": {}}) is None
    assert NATIVE.path("ml", "b") == "/apis/scheduling.k8s.io/v1alpha2/namespaces/ml/podgroups/b"


def test_minimum_counts_as_each_api_writes_them():
    assert SCHEDULER_PLUGINS.min_count(group(minMember=4)) == 4
    assert NATIVE.min_count(group(schedulingPolicy={"gang": {"minCount": 4}})) == 4
    assert NATIVE.min_count(group(schedulingPolicy={"basic": {}})) == 1
    assert NATIVE.min_count(group(schedulingPolicy={})) is None


def test_kubernetes_podgroup_status_is_its_scheduled_condition_and_keeps_the_others():
    other = {"type": "DisruptionTarget", "status": "False", "reason": "R", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    waiting = NATIVE.status(group({"conditions": [other]}), "Pending", (0, 0, 0), "needs 16 GPUs, 0 free")
    assert waiting["conditions"][0] == other
    condition = waiting["conditions"][1]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodGroupScheduled",
        "False",
        "Unschedulable",
    )
    assert (condition["message"], condition["observedGeneration"]) == ("needs 16 GPUs, 0 free", 2)
    # asked again unchanged: the same status, its transition time kept
    assert NATIVE.status(group(waiting), "Pending", (0, 0, 0), "needs 16 GPUs, 0 free") == waiting
    scheduled = NATIVE.status(group(waiting), "Scheduled", (0, 0, 0), "")["conditions"][1]
    assert (scheduled["status"], scheduled["reason"], scheduled["message"]) == ("True", "Scheduled", "")
    # once True it stays True, as kube-scheduler keeps it (a pod recreated later waits inside a started gang)
    again = NATIVE.status(group({"conditions": [scheduled]}), "Pending", (1, 0, 0), "pods added after it started")
    assert again == {"conditions": [scheduled]}


def test_scheduler_plugins_status_has_phase_counts_and_a_start_time_once():
    status = SCHEDULER_PLUGINS.status(group(), "Scheduled", (3, 1, 0), "")
    assert {key: status[key] for key in ("phase", "running", "succeeded", "failed")} == {
        "phase": "Scheduled",
        "running": 3,
        "succeeded": 1,
        "failed": 0,
    }
    assert "scheduleStartTime" in status
    started = group({"scheduleStartTime": "2026-01-01T00:00:00Z"})
    assert "scheduleStartTime" not in SCHEDULER_PLUGINS.status(started, "Scheduled", (3, 1, 0), "")


def test_a_podgroup_of_each_api_and_how_a_pod_joins_it():
    assert SCHEDULER_PLUGINS.podgroup("g", 4)["spec"] == {"minMember": 4}
    assert NATIVE.podgroup("g", 4) == {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "g"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
    }
    for api in (SCHEDULER_PLUGINS, NATIVE):  # a pod made so is read back as joining it
        labels, fields = api.joining("g")
        assert joined({"metadata": {"labels": labels}, "spec": fields}) == (api, "g")
