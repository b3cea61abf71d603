"""The nvidia_device_plugin and dcgm_exporter roles' objects as their templates render them, with the roles' own
defaults and vars: the device plugin's configuration per MIG strategy and time-slicing, the labels each GPU node gets
and the DaemonSets' node selection, and the DCGM exporter's metrics file, Service and ServiceMonitor."""

import pytest
import yaml
from role_templates import one, render

HOPPER_NODE = {"gpu_count": 8, "gpu_architectures": ["Hopper"]}


def device_plugin(**overrides) -> list[dict]:
    overrides.setdefault("nvidia_device_plugin_node_facts", {"gpu-a": HOPPER_NODE})
    return render("nvidia_device_plugin", "nvidia-device-plugin.yaml.j2", **overrides)


def plugin_config(objects: list[dict]) -> dict:
    return yaml.safe_load(one(objects, "ConfigMap")["data"]["config.yaml"])


@pytest.mark.parametrize("strategy", ["none", "single", "mixed"])
def test_the_config_names_the_mig_strategy_and_shares_nothing_by_default(strategy):
    objects = device_plugin(nvidia_device_plugin_mig_strategy=strategy)
    assert plugin_config(objects) == {"version": "v1", "flags": {"migStrategy": strategy, "failOnInitError": True}}
    container = one(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    # watching MIG devices needs CAP_SYS_ADMIN; without MIG the plugin keeps no capability at all
    assert container["securityContext"]["capabilities"] == (
        {"drop": ["ALL"]} if strategy == "none" else {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
    )
    assert ("env" in container) == (strategy != "none")


def test_time_slicing_shares_each_gpu_as_replicas_and_rolls_the_pods():
    plain = device_plugin()
    shared = device_plugin(
        nvidia_device_plugin_time_slicing_replicas=4,
        nvidia_device_plugin_time_slicing_rename_by_default=True,
        nvidia_device_plugin_time_slicing_fail_requests_greater_than_one=True,
    )
    assert plugin_config(shared)["sharing"] == {
        "timeSlicing": {
            "renameByDefault": True,
            "failRequestsGreaterThanOne": True,
            "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
        }
    }
    annotation = "railforge.io/config-sha256"
    hashes = {one(o, "DaemonSet")["spec"]["template"]["metadata"]["annotations"][annotation] for o in (plain, shared)}
    assert len(hashes) == 2  # another configuration, another pod template: the plugin restarts with it
    labels = one(shared, "Node")["metadata"]["labels"]
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing" and labels["nvidia.com/gpu.replicas"] == "4"


def test_gpu_nodes_get_feature_discovery_labels_and_the_daemonset_selects_them():
    objects = device_plugin(
        nvidia_device_plugin_node_facts={"gpu-a": HOPPER_NODE, "gpu-b": {"gpu_count": 0, "gpu_architectures": []}}
    )
    labels = {node["metadata"]["name"]: node["metadata"]["labels"] for node in objects if node["kind"] == "Node"}
    assert labels["gpu-a"] == {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/mig.strategy": "none",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.replicas": "1",
    }
    assert labels["gpu-b"]["nvidia.com/gpu.present"] == "false"  # in gpu_nodes without a GPU: no plugin there
    spec = one(objects, "DaemonSet")["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["automountServiceAccountToken"] is False
    assert spec["containers"][0]["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.1"
    assert {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v} == {
        "device-plugins": "/var/lib/kubelet/device-plugins"
    }


def test_without_gpu_nodes_only_the_cluster_wide_objects_are_rendered():
    objects = device_plugin(nvidia_device_plugin_node_facts={})
    assert sorted(obj["kind"] for obj in objects) == ["ConfigMap", "DaemonSet"]


def exporter(service_monitor: bool, **overrides) -> list[dict]:
    return render("dcgm_exporter", "dcgm-exporter.yaml.j2", dcgm_exporter_service_monitor=service_monitor, **overrides)


def test_where_something_else_serves_the_gpus_the_nodes_are_labelled_without_the_daemonset():
    objects = device_plugin(nvidia_device_plugin_install_daemonset=False)
    assert sorted(o["kind"] for o in objects) == ["ConfigMap", "Node"]
    assert one(objects, "Node")["metadata"]["labels"]["nvidia.com/gpu.present"] == "true"


def test_the_exporter_image_is_the_pair_of_the_dcgm_pins():
    container = one(exporter(False), "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.2-4.8.1-ubuntu22.04"
    pinned = exporter(False, versions_nvidia_dcgm="1:4.6.0-1", versions_nvidia_dcgm_exporter="4.8.3-1")
    assert one(pinned, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]["image"].endswith(
        ":4.6.0-4.8.3-ubuntu22.04"
    )
    assert container["args"] == ["--collectors=/etc/dcgm-exporter/metrics.csv", "--address=:9400", "--kubernetes=true"]


def test_the_metrics_file_lists_each_field_and_the_service_carries_scrape_annotations():
    metrics = [{"field": "DCGM_FI_DEV_GPU_TEMP", "type": "gauge", "help": "GPU temperature (C)."}]
    objects = exporter(False, dcgm_exporter_metrics=metrics, dcgm_exporter_port=9500)
    csv = one(objects, "ConfigMap")["data"]["metrics.csv"]
    assert [line for line in csv.splitlines() if not line.startswith("#")] == [
        "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (C)."
    ]
    service = one(objects, "Service")
    assert service["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9500",
        "prometheus.io/path": "/metrics",
    }
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9500, "targetPort": "metrics"}]
    spec = one(objects, "DaemonSet")["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert "hostNetwork" not in spec


def test_the_default_metrics_name_distinct_dcgm_fields():
    csv = one(exporter(False), "ConfigMap")["data"]["metrics.csv"]
    fields = [line.split(",")[0] for line in csv.splitlines() if not line.startswith("#")]
    assert len(fields) == len(set(fields)) >= 10
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_XID_ERRORS"} <= set(fields)


def test_a_service_monitor_only_where_its_crd_is_served():
    assert "ServiceMonitor" not in [obj["kind"] for obj in exporter(False)]
    monitor = one(exporter(True, dcgm_exporter_scrape_interval="15s"), "ServiceMonitor")
    assert monitor["spec"] == {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "dcgm-exporter"}},
        "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s"}],
    }


def test_a_remote_host_engine_is_read_over_the_nodes_network():
    spec = one(exporter(False, dcgm_exporter_remote_hostengine="localhost:5555"), "DaemonSet")["spec"]["template"]
    assert spec["spec"]["hostNetwork"] is True
    assert spec["spec"]["containers"][0]["args"][-1] == "--remote-hostengine-info=localhost:5555"
