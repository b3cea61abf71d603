"""Kubernetes' own gangs (``podgroups.scheduling.k8s.io``, served by the test bed's API server with its gates on) on
the real API server: bound whole beside a scheduler-plugins PodGroup of the same name in one queue; one that cannot
fit waits whole and says why in its condition and Events, beside a scheduler-plugins gang whose minimum count its
owner lowers; an Indexed Job that is a gang through the PodGroup its controller makes (WorkloadWithJob), and one
whose podFailurePolicy ends it on its pod's exit code: failed at once, its pods kept."""

from conftest import eventually
from kubernetes import client

from railforge.testbed.build import TEST_IMAGE

NATIVE = ("scheduling.k8s.io", "v1alpha2")


def native_podgroup(cluster, name: str, min_count: int) -> None:
    body = {
        "apiVersion": "/".join(NATIVE),
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }
    cluster.custom.create_namespaced_custom_object(*NATIVE, cluster.name, "podgroups", body)


def native_gang(cluster, name: str, pods: int, gpus: int) -> list[str]:
    native_podgroup(cluster, name, pods)
    names = [f"{name}-native-{i}" for i in range(pods)]
    for pod in names:
        cluster.pod(pod, gpus, schedulingGroup={"podGroupName": name})
    return names


def scheduled(cluster, name: str) -> dict:
    """The native PodGroup's PodGroupScheduled condition."""
    group = cluster.custom.get_namespaced_custom_object(*NATIVE, cluster.name, "podgroups", name)
    conditions = {c["type"]: c for c in (group.get("status") or {}).get("conditions") or []}
    assert "PodGroupScheduled" in conditions, group.get("status")
    return conditions["PodGroupScheduled"]


def is_scheduled(cluster, name: str) -> None:
    condition = scheduled(cluster, name)
    assert (condition["status"], condition["reason"]) == ("True", "Scheduled"), condition


def test_kubernetes_podgroups_are_gangs_beside_scheduler_plugins_ones(cluster, run_scheduler):
    cluster.add_nodes(3, gpus=8)
    adapter = run_scheduler(cluster.settings())
    native = native_gang(cluster, "train", 2, gpus=4)
    plugins = cluster.gang("train", 2, gpus=4)  # the same name, the other API: another gang
    cluster.wait("both gangs named train bound", lambda: len(cluster.bound()) == 4)
    assert set(cluster.bound()) == {*native, *plugins}
    eventually(lambda: is_scheduled(cluster, "train"))

    def plugins_scheduled() -> None:  # each API's status is its own write, in no set order
        assert (cluster.group_object("train").get("status") or {}).get("phase") in ("Scheduled", "Running")

    eventually(plugins_scheduled)
    running = {view.gang for view in adapter.state.view().running}
    assert {f"{cluster.name}/train", f"{cluster.name}/scheduling.k8s.io/train"} <= running

    big = native_gang(cluster, "big", 3, gpus=8)  # 24 GPUs; 8 are free

    def waits_whole() -> None:
        condition = scheduled(cluster, "big")
        assert (condition["status"], condition["reason"]) == ("False", "Unschedulable"), condition
        assert condition["message"].startswith("needs 24 GPUs, 8 free now"), condition
        assert any(e.startswith("FailedScheduling:") and "24 GPUs" in e for e in cluster.events("big"))
        assert any(e.startswith("FailedScheduling:") for e in cluster.events(big[0]))

    eventually(waits_whole)
    assert not set(big) & set(cluster.bound())

    # a scheduler-plugins gang in the same queue, short of room too, until its owner lowers its minMember (a
    # Kubernetes PodGroup's minCount is immutable, and the PodGroup is protected from deletion while pods use it)
    wide = cluster.gang("wide", 3, gpus=8)
    eventually(lambda: said(cluster, "wide", "24 GPUs"))
    cluster.custom.patch_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", cluster.name, "podgroups", "wide", {"spec": {"minMember": 1}}
    )
    cluster.wait("the smaller gang bound", lambda: len(set(wide) & set(cluster.bound())) == 1)
    assert not set(big) & set(cluster.bound()) and scheduled(cluster, "big")["status"] == "False"


def said(cluster, group: str, words: str) -> bool:
    reason = cluster.group_object(group)["metadata"].get("annotations", {}).get("railforge.io/reason", "")
    assert words in reason, reason
    return True


def indexed_job(cluster, name: str, pods: int, **spec) -> None:
    """An Indexed Job of ``pods`` pods of 8 GPUs for this test's scheduler, container ``main``."""
    container = {
        "name": "main",
        "image": TEST_IMAGE,
        "resources": {"requests": {"nvidia.com/gpu": "8", "cpu": "1"}, "limits": {"nvidia.com/gpu": "8"}},
    }
    job = {
        "metadata": {"name": name},
        "spec": {
            "completions": pods,
            "parallelism": pods,
            "completionMode": "Indexed",
            "template": {"spec": {"schedulerName": cluster.name, "restartPolicy": "Never", "containers": [container]}},
            **spec,
        },
    }
    client.BatchV1Api(cluster.plane.api).create_namespaced_job(cluster.name, job)


def test_an_indexed_job_is_a_gang_through_the_podgroup_its_controller_makes(cluster, run_scheduler):
    """The test bed's API server and controller manager run with WorkloadWithJob: a plain Indexed Job of three
    pods gets a Kubernetes PodGroup of minimum count three, and railforge places the three whole or not at all."""
    cluster.add_nodes(2, gpus=8)
    run_scheduler(cluster.settings())
    indexed_job(cluster, "sweep", 3)

    def its_podgroup() -> dict:
        groups = cluster.custom.list_namespaced_custom_object(*NATIVE, cluster.name, "podgroups")["items"]
        assert [g["metadata"]["ownerReferences"][0]["name"] for g in groups] == ["sweep"], groups
        return groups[0]

    group = eventually(its_podgroup)
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    name = group["metadata"]["name"]
    cluster.wait("the Job's three pods", lambda: len(cluster.pods()) == 3)

    def waits_whole() -> None:  # 24 GPUs; the pool has 16
        condition = scheduled(cluster, name)
        assert (condition["status"], condition["reason"]) == ("False", "Unschedulable"), condition
        assert "24 GPUs" in condition["message"], condition

    eventually(waits_whole)
    assert cluster.bound() == {}
    cluster.add_nodes(1, gpus=8, prefix="more-")
    cluster.wait("the Job bound whole", lambda: len(cluster.bound()) == 3)
    eventually(lambda: is_scheduled(cluster, name))


def test_a_job_whose_failure_policy_ends_it_is_failed_at_once_with_its_pods_kept(cluster, run_scheduler):
    """A Job's podFailurePolicy fails it when a pod's container exits 42 (its backoffLimit of 6 left untouched): the
    Job controller ends it whatever railforge does, so railforge fails the gang at once, never restarting it, and
    keeps the pod that failed for `kubectl logs`; the Job ends with the policy's reason."""
    cluster.add_nodes(2, gpus=8)
    adapter = run_scheduler(cluster.settings())
    rule = {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}
    indexed_job(cluster, "train", 2, podFailurePolicy={"rules": [rule]})
    cluster.wait("the Job bound whole", lambda: len(cluster.bound()) == 2)
    (failing,) = [
        pod.metadata.name
        for pod in cluster.pods()
        if pod.metadata.annotations["batch.kubernetes.io/job-completion-index"] == "0"
    ]
    ended = {"exitCode": 42, "reason": "Error"}
    container = {"name": "main", "ready": False, "restartCount": 0, "image": TEST_IMAGE, "imageID": ""}
    status = {"phase": "Failed", "containerStatuses": [{**container, "state": {"terminated": ended}}]}
    cluster.core.patch_namespaced_pod_status(failing, cluster.name, {"status": status})

    def decided() -> list:
        ours = [d for d in adapter.state.view().recent if d.gang.startswith(f"{cluster.name}/")]
        assert [d.kind for d in ours if d.kind in ("fail", "restart")] == ["fail"], ours
        return ours

    (failure,) = [d for d in eventually(decided) if d.kind == "fail"]
    policy = f"not restarted: Job train's podFailurePolicy ends the job on pod {failing} (FailJob); the failure is left"
    assert policy in failure.detail, failure
    kept = cluster.core.read_namespaced_pod(failing, cluster.name)
    assert kept.metadata.deletion_timestamp is None and kept.status.phase == "Failed"

    def job_failed() -> None:
        job = client.BatchV1Api(cluster.plane.api).read_namespaced_job("train", cluster.name)
        conditions = {c.type: c for c in job.status.conditions or []}
        assert conditions["Failed"].status == "True" and conditions["Failed"].reason == "PodFailurePolicy", conditions

    eventually(job_failed, 30)
    assert [d.kind for d in decided() if d.kind in ("fail", "restart")] == ["fail"]
