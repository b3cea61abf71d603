"""The devices stage (playbooks/devices.yml: nvidia_device_plugin, dcgm_exporter) against the real API server, with
two fake GPU Nodes carrying the DGX H100 fixture's facts and one node without GPUs: check mode changes nothing, the
first run applies the device plugin's configuration, the GPU labels (on GPU nodes only, other managers' labels left)
and the DaemonSets that select them, a second run and a check run change nothing; each MIG strategy and time-slicing
give their configuration; a ServiceMonitor appears only once its CRD is served; bad input stops before any change.

The images cannot run here (no registry, no GPU, API-only nodes without a kubelet): the test checks the objects and
what the DaemonSet controller makes of them."""

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import apply_crds, changed, eventually, run_playbook
from k8s_helpers import dgx_h100_facts, ensure_namespace
from kubernetes import client

from railforge.testbed.controlplane import add_api_node

NAMESPACE = "rf-gpu-system"
GPU_NODES = ("rf-gpu-a", "rf-gpu-b")
CPU_NODE = "rf-cpu-c"
OTHER_LABEL = {"example.com/owned-by-someone": "else"}
SERVICE_MONITORS = ("monitoring.coreos.com", "v1", "servicemonitors")


@pytest.fixture(scope="module")
def gpu_cluster(control_plane, tmp_path_factory):
    """The namespace, three Nodes with a label of another manager, and an inventory whose gpu_nodes are two of them."""
    ensure_namespace(control_plane, NAMESPACE)
    core = client.CoreV1Api(control_plane.api)
    for node in (*GPU_NODES, CPU_NODE):
        if not core.list_node(field_selector=f"metadata.name={node}").items:
            add_api_node(control_plane, node, {"cpu": "64"}, labels=OTHER_LABEL)
    hosts = {node: {"railforge_hw": dgx_h100_facts()} for node in GPU_NODES}
    inventory = tmp_path_factory.mktemp("inventory") / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}))
    return inventory


def play(plane, inventory: Path, tmp_path: Path, *args: str, **overrides) -> subprocess.CompletedProcess:
    variables = {
        "nvidia_device_plugin_kubeconfig": str(plane.admin_kubeconfig),
        "nvidia_device_plugin_namespace": NAMESPACE,
        "dcgm_exporter_kubeconfig": str(plane.admin_kubeconfig),
        "dcgm_exporter_namespace": NAMESPACE,
        **overrides,
    }
    return run_playbook("playbooks/devices.yml", variables, tmp_path, *args, inventory=inventory)


def plugin_config(plane) -> dict:
    config_map = client.CoreV1Api(plane.api).read_namespaced_config_map("nvidia-device-plugin", NAMESPACE)
    return yaml.safe_load(config_map.data["config.yaml"])


def test_the_stage_applies_the_gpu_addons_idempotently(control_plane, gpu_cluster, tmp_path):
    core = client.CoreV1Api(control_plane.api)
    apps = client.AppsV1Api(control_plane.api)
    objects = {
        "ConfigMap nvidia-device-plugin",
        "DaemonSet nvidia-device-plugin",
        "ConfigMap dcgm-exporter-metrics",
        "DaemonSet dcgm-exporter",
        "Service dcgm-exporter",
    }
    nodes = {f"Node {node}" for node in GPU_NODES}

    # check mode: every object dry-run on the server; nothing is created or labelled
    assert changed(play(control_plane, gpu_cluster, tmp_path, "--check")) == objects | nodes
    assert not apps.list_namespaced_daemon_set(NAMESPACE).items
    assert "nvidia.com/gpu.present" not in core.read_node(GPU_NODES[0]).metadata.labels

    assert changed(play(control_plane, gpu_cluster, tmp_path)) == objects | nodes  # no ServiceMonitor CRD: none
    assert changed(play(control_plane, gpu_cluster, tmp_path)) == set()
    assert changed(play(control_plane, gpu_cluster, tmp_path, "--check")) == set()

    assert plugin_config(control_plane) == {"version": "v1", "flags": {"migStrategy": "none", "failOnInitError": True}}
    for node in GPU_NODES:
        labels = core.read_node(node).metadata.labels
        assert {key: value for key, value in labels.items() if key.startswith("nvidia.com/")} == {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.count": "8",
            "nvidia.com/gpu.family": "hopper",
            "nvidia.com/mig.strategy": "none",
            "nvidia.com/gpu.sharing-strategy": "none",
            "nvidia.com/gpu.replicas": "1",
        }
        assert labels["example.com/owned-by-someone"] == "else"  # another manager's label stays
        managers = {entry.manager for entry in core.read_node(node).metadata.managed_fields}
        assert "railforge-nvidia-device-plugin" in managers
    cpu_labels = core.read_node(CPU_NODE).metadata.labels
    assert not [key for key in cpu_labels if key.startswith("nvidia.com/")]

    for name in ("nvidia-device-plugin", "dcgm-exporter"):
        daemonset = apps.read_namespaced_daemon_set(name, NAMESPACE)
        assert daemonset.spec.template.spec.node_selector == {"nvidia.com/gpu.present": "true"}
        # the DaemonSet controller wants a pod on the two GPU nodes, on no other node of the plane
        eventually(lambda ds=name: _desired(apps, ds) == 2, 30)
    plugin = apps.read_namespaced_daemon_set("nvidia-device-plugin", NAMESPACE).spec.template.spec
    assert plugin.priority_class_name == "system-node-critical"
    assert plugin.containers[0].image == "nvcr.io/nvidia/k8s-device-plugin:v0.20.1"
    assert plugin.containers[0].security_context.capabilities.drop == ["ALL"]
    exporter = apps.read_namespaced_daemon_set("dcgm-exporter", NAMESPACE).spec.template.spec
    assert exporter.containers[0].image == "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.2-4.8.1-ubuntu22.04"
    service = core.read_namespaced_service("dcgm-exporter", NAMESPACE)
    assert service.metadata.annotations["prometheus.io/scrape"] == "true"
    assert service.metadata.annotations["prometheus.io/port"] == "9400"
    metrics = core.read_namespaced_config_map("dcgm-exporter-metrics", NAMESPACE).data["metrics.csv"]
    assert "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilisation (%)." in metrics.splitlines()


def _desired(apps, name: str) -> int:
    return apps.read_namespaced_daemon_set(name, NAMESPACE).status.desired_number_scheduled or 0


@pytest.mark.parametrize(
    ("settings", "config", "labels"),
    [
        (
            {"nvidia_device_plugin_mig_strategy": "single", "nvidia_device_plugin_time_slicing_replicas": 4},
            {
                "version": "v1",
                "flags": {"migStrategy": "single", "failOnInitError": True},
                "sharing": {
                    "timeSlicing": {
                        "renameByDefault": False,
                        "failRequestsGreaterThanOne": False,
                        "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
                    }
                },
            },
            {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.sharing-strategy": "time-slicing"},
        ),
        (
            {
                "nvidia_device_plugin_time_slicing_replicas": 2,
                "nvidia_device_plugin_time_slicing_rename_by_default": True,
                "nvidia_device_plugin_time_slicing_fail_requests_greater_than_one": True,
            },
            {
                "version": "v1",
                "flags": {"migStrategy": "none", "failOnInitError": True},
                "sharing": {
                    "timeSlicing": {
                        "renameByDefault": True,
                        "failRequestsGreaterThanOne": True,
                        "resources": [{"name": "nvidia.com/gpu", "replicas": 2}],
                    }
                },
            },
            {"nvidia.com/mig.strategy": "none", "nvidia.com/gpu.replicas": "2"},
        ),
        (
            {"nvidia_device_plugin_mig_strategy": "mixed"},
            {"version": "v1", "flags": {"migStrategy": "mixed", "failOnInitError": True}},
            {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.sharing-strategy": "none"},
        ),
    ],
    ids=["single-time-sliced", "time-slicing-options", "mixed"],
)
def test_each_mig_strategy_and_time_slicing_give_their_configuration(
    control_plane, gpu_cluster, tmp_path, settings, config, labels
):
    # the configuration's hash is in the pod template: a changed configuration changes the DaemonSet too
    result = changed(play(control_plane, gpu_cluster, tmp_path, **settings))
    assert {"ConfigMap nvidia-device-plugin", "DaemonSet nvidia-device-plugin"} <= result
    assert plugin_config(control_plane) == config
    node_labels = client.CoreV1Api(control_plane.api).read_node(GPU_NODES[1]).metadata.labels
    assert labels.items() <= node_labels.items()
    assert changed(play(control_plane, gpu_cluster, tmp_path, **settings)) == set()


def test_a_service_monitor_only_once_its_crd_is_served(control_plane, gpu_cluster, tmp_path):
    custom = client.CustomObjectsApi(control_plane.api)
    assert "ServiceMonitor dcgm-exporter" not in changed(play(control_plane, gpu_cluster, tmp_path))
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"plural": "servicemonitors", "singular": "servicemonitor", "kind": "ServiceMonitor"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                        }
                    },
                }
            ],
        },
    }
    crd_file = tmp_path / "servicemonitor-crd.yaml"
    crd_file.write_text(yaml.safe_dump(crd))
    apply_crds(control_plane, crd_file)

    assert changed(play(control_plane, gpu_cluster, tmp_path, dcgm_exporter_scrape_interval="15s")) == {
        "ServiceMonitor dcgm-exporter"
    }
    monitor = custom.get_namespaced_custom_object(
        *SERVICE_MONITORS[:2], NAMESPACE, SERVICE_MONITORS[2], "dcgm-exporter"
    )
    assert monitor["spec"] == {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "dcgm-exporter"}},
        "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s"}],
    }
    assert changed(play(control_plane, gpu_cluster, tmp_path, dcgm_exporter_scrape_interval="15s")) == set()


def test_bad_input_stops_the_stage_before_anything_changes(control_plane, gpu_cluster, tmp_path):
    ensure_namespace(control_plane, "rf-gpu-bad")
    bad = {
        "nvidia_device_plugin_namespace": "rf-gpu-bad",
        "dcgm_exporter_namespace": "rf-gpu-bad",
        "nvidia_device_plugin_mig_strategy": "mixed",
        "nvidia_device_plugin_time_slicing_replicas": 4,
    }
    result = play(control_plane, gpu_cluster, tmp_path, **bad)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    words = " ".join(output.split())  # the callback wraps long messages
    # the pre-flight's rule, its one home
    assert (
        "nvidia_device_plugin_time_slicing_replicas 4 shares nvidia.com/gpu, which nvidia_device_plugin_mig_strategy "
        "mixed does not advertise" in words
    )
    assert "changed=0" in output
    config_maps = client.CoreV1Api(control_plane.api).list_namespaced_config_map("rf-gpu-bad").items
    assert [c.metadata.name for c in config_maps] == ["kube-root-ca.crt"]  # only what the cluster puts there
    assert not client.AppsV1Api(control_plane.api).list_namespaced_daemon_set("rf-gpu-bad").items


def test_without_gpu_nodes_the_stage_labels_nothing(control_plane, gpu_cluster, tmp_path):
    """The lab's case: no host in gpu_nodes. The cluster-wide objects are applied, no Node is touched."""
    ensure_namespace(control_plane, "rf-gpu-none")
    no_gpus = tmp_path / "hosts.yml"
    no_gpus.write_text(json.dumps({"all": {"hosts": {"cpu-only": {}}}}))
    namespaces = {"nvidia_device_plugin_namespace": "rf-gpu-none", "dcgm_exporter_namespace": "rf-gpu-none"}
    applied = changed(play(control_plane, no_gpus, tmp_path, **namespaces))
    assert applied == {
        "ConfigMap nvidia-device-plugin",
        "DaemonSet nvidia-device-plugin",
        "ConfigMap dcgm-exporter-metrics",
        "DaemonSet dcgm-exporter",
        "Service dcgm-exporter",
    } | _service_monitor_if_served(control_plane)
    assert not [item for item in applied if item.startswith("Node ")]


def _service_monitor_if_served(plane) -> set[str]:
    """'ServiceMonitor dcgm-exporter' when an earlier test installed the ServiceMonitor CRD."""
    crds = client.ApiextensionsV1Api(plane.api).list_custom_resource_definition().items
    served = {crd.metadata.name for crd in crds}
    return {"ServiceMonitor dcgm-exporter"} if "servicemonitors.monitoring.coreos.com" in served else set()
