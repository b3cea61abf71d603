"""The real Kubeflow MPI operator, out of cluster, with gang scheduling named: an MPIJob yields the launcher, the
workers and a scheduling.x-k8s.io/v1alpha1 PodGroup. CRDs and RBAC come from the pinned release module."""

import json
import time

from k8s_helpers import end_member, mpijob
from kubernetes import client

from railforge.testbed.controlplane import add_api_node, create_namespace
from railforge.testbed.procs import wait_for

SCHEDULER = "railforge"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
POOL_LABEL = "railforge.test/pool"


def test_an_mpijob_yields_launcher_workers_and_a_podgroup(control_plane, mpi_operator):
    create_namespace(control_plane, "mpi")
    custom = client.CustomObjectsApi(control_plane.api)
    custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", "mpi", "mpijobs", mpijob("allreduce", 2))
    core = client.CoreV1Api(control_plane.api)

    def gang_pods():
        return core.list_namespaced_pod("mpi", label_selector=f"{GROUP_LABEL}=allreduce").items

    wait_for("launcher and workers", lambda: len(gang_pods()) == 3, 60, [mpi_operator])
    group = custom.get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", "mpi", "podgroups", "allreduce")
    assert group["spec"]["minMember"] == 3  # two workers + the launcher
    assert group["spec"]["minResources"] == {"cpu": "8100m", "nvidia.com/gpu": "16"}  # what the three request
    assert group["metadata"]["ownerReferences"][0]["kind"] == "MPIJob"
    pods = gang_pods()
    roles = sorted(pod.metadata.labels["training.kubeflow.org/job-role"] for pod in pods)
    assert roles == ["launcher", "worker", "worker"]
    assert {pod.spec.scheduler_name for pod in pods} == {SCHEDULER}
    assert all(pod.spec.node_name is None and pod.status.phase == "Pending" for pod in pods)  # bound by us, later
    workers = sorted(
        pod.metadata.name for pod in pods if pod.metadata.labels["training.kubeflow.org/job-role"] == "worker"
    )
    assert workers == ["allreduce-worker-0", "allreduce-worker-1"]
    # leave the scheduler's tests below only their own gang
    custom.delete_namespaced_custom_object(
        "kubeflow.org", "v2beta1", "mpi", "mpijobs", "allreduce", propagation_policy="Foreground"
    )
    wait_for("the MPIJob's pods gone", lambda: not gang_pods(), 60, [mpi_operator])


def two_node_pool(control_plane, pool: str) -> None:
    """Namespace ``pool`` and two API-only 8-GPU nodes of one leaf labelled as the pool (the scheduler's selector)."""
    create_namespace(control_plane, pool)
    for index in range(2):
        add_api_node(
            control_plane,
            f"{pool}-n{index}",
            {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi"},
            labels={POOL_LABEL: pool, "railforge.io/leaf": "leaf0"},
        )


def test_railforge_binds_an_mpijobs_launcher_and_workers_at_once(control_plane, mpi_operator, run_scheduler):
    namespace, pool = "mpi-bind", "mpi-bind"
    two_node_pool(control_plane, pool)
    adapter = run_scheduler(
        {
            "scheduler_name": SCHEDULER,
            "node_selector": f"{POOL_LABEL}={pool}",
            "min_period_seconds": 0.05,
            "leader_election": {"enabled": False},
        }
    )
    custom = client.CustomObjectsApi(control_plane.api)
    custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", namespace, "mpijobs", mpijob("ring", 2))
    core = client.CoreV1Api(control_plane.api)

    def bound() -> dict[str, str]:
        """Role (launcher, worker-0, worker-1) -> node of the gang's bound pods; the launcher is a Job's pod."""
        pods = core.list_namespaced_pod(namespace, label_selector=f"{GROUP_LABEL}=ring").items
        return {
            pod.metadata.name.removeprefix("ring-").split("-")[0]
            if "launcher" in pod.metadata.name
            else pod.metadata.name.removeprefix("ring-"): pod.spec.node_name
            for pod in pods
            if pod.spec.node_name
        }

    submitted = time.monotonic()
    wait_for("the gang bound", lambda: len(bound()) == 3, 60, [mpi_operator])
    print(f"MPIJob submitted -> launcher and 2 workers bound: {time.monotonic() - submitted:.2f} s")
    placement = bound()
    workers = {placement["worker-0"], placement["worker-1"]}
    assert workers == {f"{pool}-n0", f"{pool}-n1"}  # 8 GPUs each: one worker per node
    assert placement["launcher"] in workers
    group = custom.get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "ring")
    # the placement written before binding names every pod of the gang by uid
    plan = json.loads(group["metadata"]["annotations"]["railforge.io/placement"])
    uids = {pod.metadata.uid: pod.spec.node_name for pod in core.list_namespaced_pod(namespace).items}
    assert plan == {uid: node for uid, node in uids.items() if uid in plan} and len(plan) == 3
    view = adapter.state.view()
    assert [(r.gang, len(r.placement)) for r in view.running] == [(f"{namespace}/ring", 3)]
    assert any(d.kind == "bind" and d.gang == f"{namespace}/ring" for d in view.recent)

    def scheduled() -> bool:
        status = (
            custom.get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "ring").get(
                "status"
            )
            or {}
        )
        return status.get("phase") == "Scheduled" and bool(status.get("scheduleStartTime"))

    wait_for("the PodGroup's status", scheduled, 10)

    # a worker ends with exit code 3: the evidence is told on the MPIJob too, which may delete its PodGroup once it
    # gives up
    end_member(core, namespace, "ring-worker-1", "worker")

    def told() -> list[str]:
        selector = "involvedObject.kind=MPIJob,involvedObject.name=ring,reason=MemberFailed"
        return [event.message for event in core.list_namespaced_event(namespace, field_selector=selector).items]

    wait_for("the MPIJob's MemberFailed Event", told, 30)
    assert told()[0].startswith("member ring-worker-1 container worker exited 3 (Error)"), told()


def test_an_mpijob_is_restarted_whole_within_its_owners_limit_and_left_to_it_past_it(
    control_plane, mpi_operator, run_scheduler
):
    """runPolicy.backoffLimit 1 is the launcher Job's limit, and each restart deletes the launcher, which that Job
    counts. A failed worker restarts the whole gang once: the MPI operator and the launcher's Job make the pods
    again, railforge binds them by one plan. The next failure would pass the owner's limit, so the gang fails
    instead (no max_restarts of the scheduler's): only the running pods are deleted, the failed worker's pod stays
    with its exit code, and the MPI operator fails the MPIJob on its own."""
    namespace, pool = "mpi-budget", "mpi-budget"
    two_node_pool(control_plane, pool)
    adapter = run_scheduler(
        {
            "scheduler_name": SCHEDULER,
            "node_selector": f"{POOL_LABEL}={pool}",
            "min_period_seconds": 0.05,
            "leader_election": {"enabled": False},
            "eviction_grace_seconds": 0,  # no kubelet here to end a pod's grace period
            "policy": {"restart_backoff_base": 1},
        }
    )
    job = mpijob("budget", 2)
    job["spec"]["runPolicy"] = {"backoffLimit": 1}
    custom = client.CustomObjectsApi(control_plane.api)
    custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", namespace, "mpijobs", job)
    core = client.CoreV1Api(control_plane.api)

    def current() -> list:
        """The gang's pods not being deleted, after doing what a kubelet does for those being deleted (none here):
        ending their containers, so that the launcher Job's finalizer lets them go."""
        pods = core.list_namespaced_pod(namespace, label_selector=f"{GROUP_LABEL}=budget").items
        for pod in pods:
            if pod.metadata.deletion_timestamp and pod.status.phase not in ("Succeeded", "Failed"):
                try:
                    core.patch_namespaced_pod_status(pod.metadata.name, namespace, {"status": {"phase": "Failed"}})
                except client.ApiException as gone:  # let go between the list and the patch: nothing left to end
                    if gone.status != 404:
                        raise
        return [pod for pod in pods if pod.metadata.deletion_timestamp is None]

    def annotations() -> dict:
        group = custom.get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "budget")
        return group["metadata"].get("annotations") or {}

    def bound_whole(earlier: set[str]) -> bool:
        """Launcher and both workers bound, none of an earlier incarnation, all placed by one plan."""
        bound = {pod.metadata.uid: pod.spec.node_name for pod in current() if pod.spec.node_name}
        if len(bound) < 3 or bound.keys() & earlier:
            return False
        assert json.loads(annotations()["railforge.io/placement"]) == bound
        return True

    def failures() -> list[str]:
        current()  # the pods being deleted end first: until then the gang still counts as running
        return [d.detail for d in adapter.state.view().recent if d.kind == "fail" and d.gang == f"{namespace}/budget"]

    def mpijob_failed() -> bool:
        current()
        status = custom.get_namespaced_custom_object("kubeflow.org", "v2beta1", namespace, "mpijobs", "budget")
        conditions = (status.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Failed" and c["status"] == "True" for c in conditions)

    try:
        wait_for("the gang bound", lambda: bound_whole(set()), 60, [mpi_operator])
        first = {pod.metadata.uid for pod in current()}
        end_member(core, namespace, "budget-worker-1", "worker")
        wait_for("the gang restarted and bound whole again", lambda: bound_whole(first), 90, [mpi_operator])
        assert annotations()["railforge.io/restarts"] == "1"
        assert annotations()["railforge.io/last-failure"].startswith("member budget-worker-1 container worker exited 3")
        assert "railforge.io/failed" not in annotations()

        second = {pod.metadata.uid for pod in current()}
        end_member(core, namespace, "budget-worker-0", "worker")  # a second restart would pass the owner's limit
        wait_for("the gang failed", failures, 30)
        assert (
            "member budget-worker-0 failed; not restarted: its owner counts a restart's removed pods against its own "
            "limit, which allows 1 restart (1 done); the failure is left to it" in failures()[0]
        ), failures()
        kept = core.read_namespaced_pod("budget-worker-0", namespace)
        assert kept.metadata.deletion_timestamp is None and kept.status.phase == "Failed"
        assert kept.status.container_statuses[0].state.terminated.exit_code == 3
        wait_for("the MPI operator fails the MPIJob", mpijob_failed, 60, [mpi_operator])
        watched_until = time.monotonic() + 2
        while time.monotonic() < watched_until:  # some 40 scheduling passes (0.05 s apart): nothing bound again
            assert not any(pod.spec.node_name for pod in current() if pod.metadata.uid not in first | second)
            time.sleep(0.2)
    finally:
        custom.delete_namespaced_custom_object(
            "kubeflow.org", "v2beta1", namespace, "mpijobs", "budget", propagation_policy="Foreground"
        )
        wait_for("the MPIJob's pods gone", lambda: not current(), 60, [mpi_operator])
