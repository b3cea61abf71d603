"""Malformed input to the nvidia_device_plugin and dcgm_exporter roles fails before they look at or change the
cluster, naming the variable and what was expected (the device plugin's other rules are the pre-flight's)."""

import json

import pytest

GPU_NODE = {"railforge_hw": {"gpu_count": 8, "gpu_architectures": ["Hopper"]}}

PLUGIN_CASES = {
    "unknown MIG strategy": (
        {"nvidia_device_plugin_mig_strategy": "all"},
        "value of nvidia_device_plugin_mig_strategy must be one of: none, single, mixed, got: all",
    ),
}

EXPORTER_CASES = {
    "host engine without a port": (
        {"dcgm_exporter_remote_hostengine": "localhost"},
        "- dcgm_exporter_remote_hostengine must be HOST:PORT like localhost:5555 ([IPv6]:PORT for an IPv6 address),"
        " got 'localhost'",
    ),
    "empty node selector": (
        {"dcgm_exporter_node_selector": {}},
        "- dcgm_exporter_node_selector must have at least 1 item(s), got {} (dict)",
    ),
    "no metric": ({"dcgm_exporter_metrics": []}, "- dcgm_exporter_metrics must have at least 1 item(s), got [] (list)"),
    "unknown metric type": (
        {"dcgm_exporter_metrics": [{"field": "DCGM_FI_DEV_GPU_TEMP", "type": "histogram", "help": "temp"}]},
        "value of type must be one of: gauge, counter, label, got: histogram found in dcgm_exporter_metrics",
    ),
    "interval without a unit": (
        {"dcgm_exporter_scrape_interval": "30"},
        "- dcgm_exporter_scrape_interval must be a duration like 30s, got '30'",
    ),
}


def words(output: str) -> str:
    return " ".join(output.split())  # the output callback wraps long messages


@pytest.mark.parametrize(("variables", "message"), PLUGIN_CASES.values(), ids=PLUGIN_CASES.keys())
def test_malformed_device_plugin_input_fails_first(refused, variables, message):
    assert message in words(refused("nvidia_device_plugin", variables, "Look up the namespace and the nodes"))


def test_a_gpu_node_without_facts_is_named(refused, tmp_path):
    inventory = tmp_path / "hosts.json"
    hosts = {"gpu-a": GPU_NODE, "gpu-b": {}}
    inventory.write_text(json.dumps({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}))
    output = refused(
        "nvidia_device_plugin",
        {"nvidia_device_plugin_nodes": ["gpu-a", "gpu-b"]},
        "Look up the namespace and the nodes",
        inventory=str(inventory),
    )
    assert "nvidia_device_plugin_nodes: expected inventory hosts with railforge_hw facts" in words(output)
    assert "without them are gpu-b" in words(output)


@pytest.mark.parametrize(("variables", "message"), EXPORTER_CASES.values(), ids=EXPORTER_CASES.keys())
def test_malformed_exporter_input_fails_first(refused, variables, message):
    output = refused("dcgm_exporter", variables, "Look up the namespace and the ServiceMonitor CRD")
    assert message in output
    if message.startswith("- "):  # a line of the one message of railforge_role_input
        assert "Invalid input for role dcgm_exporter (nothing was changed):\n" in output


def test_every_exporter_problem_is_reported_at_once(refused):
    bad = {"dcgm_exporter_scrape_interval": "30", "dcgm_exporter_node_selector": {}}
    output = refused("dcgm_exporter", bad, "Look up")
    assert "Invalid input for role dcgm_exporter (nothing was changed):\n- dcgm_exporter_node_selector must" in output
    assert "\n- dcgm_exporter_scrape_interval must be a duration" in output
