"""The rail_networks manifest: the RDMA shared device plugin rolls its pods when its config changes."""

import hashlib

from role_templates import render


def plugin_config_and_hash(rdma_config: dict) -> tuple[str, str]:
    objects = render(
        "rail_networks",
        "rail_networks.yaml.j2",
        rail_networks_rails=[],
        rail_networks_nccl_classes={},
        rail_networks_rdma_config=rdma_config,
    )
    config, plugin = [obj for obj in objects if obj["metadata"]["name"] == "rdma-shared-device-plugin"]
    assert (config["kind"], plugin["kind"]) == ("ConfigMap", "DaemonSet")
    return config["data"]["config.json"], plugin["spec"]["template"]["metadata"]["annotations"][
        "railforge.io/config-sha256"
    ]


def resource(name: str, devices: list[str]) -> dict:
    return {
        "periodicUpdateInterval": 300,
        "configList": [{"resourceName": name, "rdmaHcaMax": 8, "selectors": {"ifNames": devices}}],
    }


def test_a_changed_rdma_config_changes_the_device_plugins_pod_template():
    config, annotation = plugin_config_and_hash(resource("rail0", ["ibp12s0"]))
    # the annotation is the hash of exactly what the ConfigMap holds, so the two cannot drift apart
    assert annotation == hashlib.sha256(config.encode()).hexdigest()
    assert plugin_config_and_hash(resource("rail0", ["ibp12s0"]))[1] == annotation
    # another device in a rail, or another rail name: another hash, so the DaemonSet rolls onto the new ConfigMap
    assert plugin_config_and_hash(resource("rail0", ["ibp12s0", "ibp18s0"]))[1] != annotation
    assert plugin_config_and_hash(resource("rail1", ["ibp12s0"]))[1] != annotation
