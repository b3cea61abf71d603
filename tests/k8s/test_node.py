"""A real node (containerd + runc + CNI + kubelet) runs real pods from local images, with fake devices."""

import pytest
from kubernetes import client

from railforge.lab import rdma_env
from railforge.testbed import draslices
from railforge.testbed.controlplane import create_namespace
from railforge.testbed.deviceplugin import DEVICE_MOUNT, FakeDevicePlugin
from railforge.testbed.draplugin import FakeDraDriver, device_env
from railforge.testbed.node import one_shot_pod
from railforge.testbed.procs import wait_for


def run_to_end(
    plane, node, namespace: str, name: str, script: str, limits: dict | None = None, claims=(), **spec
) -> client.V1Pod:
    """Run ``script`` in a one-shot pod on ``node`` (bound straight to it, unless ``spec`` says otherwise) to its
    end; ``claims``: ResourceClaims its container uses."""
    core = client.CoreV1Api(plane.api)
    body = one_shot_pod(name, node.name, ["/bin/sh", "-c", script], limits=limits)
    body["spec"].update(spec)
    if claims:
        body["spec"]["resourceClaims"] = [{"name": claim, "resourceClaimName": claim} for claim in claims]
        body["spec"]["containers"][0]["resources"]["claims"] = [{"name": claim} for claim in claims]
    core.create_namespaced_pod(namespace, body)

    def finished() -> bool:
        return core.read_namespaced_pod(name, namespace).status.phase in ("Succeeded", "Failed")

    wait_for(f"pod {namespace}/{name} to finish", finished, 90)
    return core.read_namespaced_pod(name, namespace)


@pytest.fixture(scope="module")
def namespace(control_plane):
    create_namespace(control_plane, "node-tests")
    return "node-tests"


@pytest.fixture(scope="module")
def devices(node):
    plugins = [
        FakeDevicePlugin("nvidia.com/gpu", 4, "NVIDIA_VISIBLE_DEVICES", node.directory).start(),
        FakeDevicePlugin("rdma/rail0", 2, rdma_env("rail0"), node.directory).start(),
    ]
    core = client.CoreV1Api(node.plane.api)

    def advertised() -> bool:
        allocatable = core.read_node(node.name).status.allocatable
        return allocatable.get("nvidia.com/gpu") == "4" and allocatable.get("rdma/rail0") == "2"

    wait_for("the kubelet to advertise the fake devices", advertised, 60)
    yield {plugin.resource: plugin for plugin in plugins}
    for plugin in plugins:
        plugin.stop()


def test_a_pod_runs_echo_and_its_log_comes_back_through_the_api(control_plane, node, namespace):
    pod = run_to_end(control_plane, node, namespace, "echo", "echo hello from $(hostname) as $(id -u)")
    assert pod.status.phase == "Succeeded"
    log = client.CoreV1Api(control_plane.api).read_namespaced_pod_log("echo", namespace)
    assert log.strip() == "hello from echo as 65534"


def test_a_pod_gets_what_allocate_returned_for_the_devices_it_asked_for(control_plane, node, namespace, devices):
    script = f"echo gpus=$NVIDIA_VISIBLE_DEVICES rdma=${rdma_env('rail0')}; cat {DEVICE_MOUNT}/*"
    pod = run_to_end(control_plane, node, namespace, "devices", script, {"nvidia.com/gpu": "2", "rdma/rail0": "1"})
    assert pod.status.phase == "Succeeded"
    log = client.CoreV1Api(control_plane.api).read_namespaced_pod_log("devices", namespace).splitlines()
    gpus, rdma = devices["nvidia.com/gpu"].allocations[-1], devices["rdma/rail0"].allocations[-1]
    assert len(gpus) == 2 and len(rdma) == 1
    assert log[0] == f"gpus={','.join(gpus)} rdma={rdma[0]}"
    assert sorted(log[1:]) == sorted(
        [f"nvidia.com/gpu {gpu} (railforge stand-in, no hardware)" for gpu in gpus]
        + [f"rdma/rail0 {rdma[0]} (railforge stand-in, no hardware)"]
    )


def test_a_pod_asking_more_devices_than_advertised_is_refused_by_the_kubelet(control_plane, node, namespace, devices):
    allocations = len(devices["nvidia.com/gpu"].allocations)
    pod = run_to_end(control_plane, node, namespace, "too-many", "echo never", {"nvidia.com/gpu": "5"})
    # Bound straight to the node (no scheduler), the kubelet's device manager refuses it at admission and says why.
    assert pod.status.phase == "Failed"
    assert pod.status.reason == "UnexpectedAdmissionError"
    assert "requested number of devices unavailable for nvidia.com/gpu. Requested: 5, Available: 4" in (
        pod.status.message
    ), pod.status.message
    assert len(devices["nvidia.com/gpu"].allocations) == allocations  # Allocate was never called


def test_a_scheduled_pod_asking_too_many_devices_stays_pending_with_the_reason(control_plane, node, namespace, devices):
    scheduler = control_plane.start_scheduler()
    try:
        pod = one_shot_pod("wants-five", node.name, ["echo", "never"], limits={"nvidia.com/gpu": "5"})
        del pod["spec"]["nodeName"]  # left to the default scheduler, kept to this node by its hostname label
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node.name}
        core = client.CoreV1Api(control_plane.api)
        core.create_namespaced_pod(namespace, pod)

        def unschedulable() -> bool:
            conditions = core.read_namespaced_pod("wants-five", namespace).status.conditions or []
            return any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in conditions)

        wait_for("the scheduler's verdict", unschedulable, 30, [scheduler])
        status = core.read_namespaced_pod("wants-five", namespace).status
        assert status.phase == "Pending"
        message = next(c.message for c in status.conditions if c.type == "PodScheduled")
        assert "Insufficient nvidia.com/gpu" in message, message  # judged on what the kubelet advertises (4)
    finally:
        control_plane.stop_component(scheduler)


def test_an_unhealthy_device_leaves_the_allocatable_count(control_plane, node, devices):
    gpu = devices["nvidia.com/gpu"]
    core = client.CoreV1Api(control_plane.api)
    gpu.set_health("gpu-3", healthy=False)
    try:
        wait_for(
            "allocatable to drop to 3",
            lambda: core.read_node(node.name).status.allocatable["nvidia.com/gpu"] == "3",
            30,
        )
    finally:
        gpu.set_health("gpu-3", healthy=True)
    wait_for("allocatable back at 4", lambda: core.read_node(node.name).status.allocatable["nvidia.com/gpu"] == "4", 30)


def test_the_fake_devices_register_again_after_a_kubelet_restart(control_plane, node, namespace, devices):
    gpu = devices["nvidia.com/gpu"]
    registrations, allocations = gpu.registrations, len(gpu.allocations)
    node.restart_kubelet()
    wait_for("the plugin to register with the new kubelet", lambda: gpu.registrations > registrations, 30)
    core = client.CoreV1Api(control_plane.api)
    wait_for(
        "the GPUs back in allocatable",
        lambda: core.read_node(node.name).status.allocatable["nvidia.com/gpu"] == "4",
        60,
    )
    pod = run_to_end(
        control_plane, node, namespace, "after-restart", "echo $NVIDIA_VISIBLE_DEVICES", {"nvidia.com/gpu": "1"}
    )
    assert pod.status.phase == "Succeeded", (pod.status.reason, pod.status.message)
    assert len(gpu.allocations) == allocations + 1  # the new kubelet called our Allocate


def gang_on_the_node(plane, node, namespace: str, run_scheduler, gang: str, scripts: dict, limits=None):
    """A railforge scheduler for the real node alone (returned), and a PodGroup ``gang`` of one pod per script (pod
    name -> shell script), each pinned by nodeSelector kubernetes.io/hostname as a perftest pair is."""
    scheduler = f"railforge-{gang}"
    adapter = run_scheduler(
        {
            "scheduler_name": scheduler,
            "node_selector": f"kubernetes.io/hostname={node.name}",
            "min_period_seconds": 0.05,
            "eviction_grace_seconds": 0,
            "leader_election": {"enabled": False},
        }
    )
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": gang}}
    client.CustomObjectsApi(plane.api).create_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", {**group, "spec": {"minMember": len(scripts)}}
    )
    for name, script in scripts.items():
        pod = one_shot_pod(name, node.name, ["/bin/sh", "-c", script], limits=limits)
        del pod["spec"]["nodeName"]
        pod["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": gang}
        pod["spec"].update(schedulerName=scheduler, nodeSelector={"kubernetes.io/hostname": node.name})
        client.CoreV1Api(plane.api).create_namespaced_pod(namespace, pod)
    return adapter


def test_a_pair_pinned_by_hostname_is_bound_whole_by_railforge_and_runs(
    control_plane, node, namespace, devices, scheduler_crds, run_scheduler
):
    """A perftest pair's shape on a real kubelet: one PodGroup, two pods with an RDMA device each, pinned by
    nodeSelector kubernetes.io/hostname. railforge binds both (the kubelet admits them: its node carries the label)
    and both run with their device."""
    names = ("pair-server", "pair-client")
    scripts = dict.fromkeys(names, f"echo ${rdma_env('rail0')}")
    gang_on_the_node(control_plane, node, namespace, run_scheduler, "pair", scripts, limits={"rdma/rail0": "1"})
    core = client.CoreV1Api(control_plane.api)

    def ran() -> bool:
        return all(core.read_namespaced_pod(name, namespace).status.phase == "Succeeded" for name in names)

    wait_for("both pods of the pinned pair to run", ran, 90)
    devices_seen = set()
    for name in names:
        assert core.read_namespaced_pod(name, namespace).spec.node_name == node.name
        devices_seen.add(core.read_namespaced_pod_log(name, namespace).strip())
    assert len(devices_seen) == 2  # each pod got its own of the two fake rail devices


def test_a_member_that_exits_non_zero_leaves_its_exit_code_and_log_on_its_gang(
    control_plane, node, namespace, scheduler_crds, run_scheduler
):
    """On a real kubelet: one member of a gang prints why and exits 3; railforge restarts the gang (deleting both
    pods), and what the user needs to read why stays on the PodGroup: the exit code and the log's last lines. The
    restart's own Event, log line and dashboard row name the exit code too."""
    scripts = {"crash-0": "echo step 40; echo 'rank 0: bad shard 17'; exit 3", "crash-1": "sleep 60"}
    adapter = gang_on_the_node(control_plane, node, namespace, run_scheduler, "crash", scripts)
    custom = client.CustomObjectsApi(control_plane.api)

    def evidence() -> str | None:
        group = custom.get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "crash")
        return (group["metadata"].get("annotations") or {}).get("railforge.io/last-failure")

    wait_for("the gang's failure kept on its PodGroup", evidence, 90)
    assert evidence().splitlines() == [
        "member crash-0 container main exited 3 (Error)",
        "last lines of its log:",
        "step 40",
        "rank 0: bad shard 17",
    ]
    pods = client.CoreV1Api(control_plane.api).list_namespaced_pod
    gang = "scheduling.x-k8s.io/pod-group=crash"
    wait_for("the restart to delete both pods", lambda: not pods(namespace, label_selector=gang).items, 60)

    def restarts() -> list:
        return [decision for decision in adapter.state.view().recent if decision.kind == "restart"]

    # with no grace the pods are gone as their deletes commit, a moment before the adapter records the restart
    wait_for("the restart's decision", restarts, 10)
    (restart,) = restarts()
    assert restart.detail.endswith("(member crash-0 container main exited 3 (Error))"), restart
    events = client.CoreV1Api(control_plane.api).list_namespaced_event

    def told() -> list[str]:
        selector = "involvedObject.name=crash,reason=Restarted"
        return [event.message for event in events(namespace, field_selector=selector).items]

    wait_for("the restart's Event", told, 30)
    assert told() == [restart.detail], told()


def test_a_pod_the_scheduler_bound_with_a_dra_claim_runs_with_the_devices_allocated(
    control_plane, node, namespace, run_scheduler
):
    """The DRA path end to end on the real node: the stand-in's slices published, a claim of two GPUs allocated by
    railforge with the pod's gang and the pod bound; the kubelet prepares the claim through the stand-in's kubelet
    plugin and containerd injects its CDI devices, which the container sees."""
    custom = client.CustomObjectsApi(control_plane.api)
    for body in draslices.device_classes():
        if not custom.list_cluster_custom_object(
            "resource.k8s.io", "v1", "deviceclasses", field_selector=f"metadata.name={body['metadata']['name']}"
        )["items"]:
            custom.create_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", body)
    for body in draslices.node_slice(node.name, gpus=4):
        custom.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", body)
    driver = FakeDraDriver(
        draslices.GPU_DRIVER, control_plane.client(), node.kubelet_dir, node.cdi_dir, node.directory
    ).start()
    try:
        wait_for("the kubelet to register the DRA driver stand-in", driver.registered.is_set, 60)
        request = {"name": "gpus", "exactly": {"deviceClassName": draslices.GPU_DRIVER, "count": 2}}
        claim = {"metadata": {"name": "two-gpus"}, "spec": {"devices": {"requests": [request]}}}
        custom.create_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims", claim)
        run_scheduler(
            {
                "scheduler_name": "dra-node",
                "node_selector": f"kubernetes.io/hostname={node.name}",
                "leader_election": {"enabled": False},
                "min_period_seconds": 0.05,
            }
        )
        env = device_env(draslices.GPU_DRIVER)
        script = f"env | grep ^{env}_ | sort; cat {DEVICE_MOUNT}/*"
        pod = run_to_end(
            control_plane,
            node,
            namespace,
            "claimed",
            script,
            claims=["two-gpus"],
            nodeName=None,
            schedulerName="dra-node",
        )
        assert pod.status.phase == "Succeeded", pod.status
        claim_uid = custom.get_namespaced_custom_object(
            "resource.k8s.io", "v1", namespace, "resourceclaims", "two-gpus"
        )["metadata"]["uid"]
        ((prepared_uid, devices),) = driver.prepared
        assert prepared_uid == claim_uid and len(devices) == 2
        log = client.CoreV1Api(control_plane.api).read_namespaced_pod_log("claimed", namespace).splitlines()
        assert log[:2] == [f"{env}_{d.upper().replace('-', '_')}={d}" for d in sorted(devices)]
        assert sorted(log[2:]) == [
            f"{draslices.GPU_DRIVER} {node.name}/{d} (railforge stand-in, no hardware)" for d in sorted(devices)
        ]

        def released() -> bool:  # the pod ended: the kubelet unprepared the claim, Kubernetes deallocated it
            obj = custom.get_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims", "two-gpus")
            return driver.unprepared == [claim_uid] and not (obj.get("status") or {}).get("allocation")

        wait_for("the claim released", released, 60)
    finally:
        driver.stop()
