"""The sriov_network role (playbooks/devices.yml) against the real API server, with two fake nodes whose inventory
sets sriov_vfs_pfs (two RoCE PFs and one InfiniBand PF each) and a CPU node without PFs: check mode changes nothing,
the first run applies the device plugin's ConfigMap (its exact resourceList), a NetworkAttachmentDefinition per pool
with a CIDR, the SR-IOV nodes' label and the DaemonSets (the InfiniBand CNI's too); a second run and a check run
change nothing; pools that disagree between nodes, or a system namespace the cluster lacks, stop the run before
anything changes.

The DaemonSets' images are not run here (no registry, no SR-IOV NIC): their objects are read back."""

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from conftest import can_i, changed, run_playbook
from k8s_helpers import dgx_h100_facts, refused_words
from kubernetes import client

from railforge.testbed.controlplane import add_api_node, create_namespace

NAMESPACE = "rf-sriov-test"
SYSTEM_NAMESPACE = "rf-sriov-system"
NODES = ("rf-sriov-a", "rf-sriov-b")
CPU_NODE = "rf-sriov-cpu"
PFS = [
    {"pci_address": "0000:3b:00.0", "num_vfs": 8, "link_type": "eth"},
    {"pci_address": "0000:86:00.0", "num_vfs": 8, "link_type": "eth"},
    {"pci_address": "0000:af:00.0", "num_vfs": 16, "link_type": "ib"},
]
CIDRS = ["10.120.0.0/16", "", "10.122.0.0/16"]
NAD = ("k8s.cni.cncf.io", "v1", "network-attachment-definitions")


def inventory_file(directory: Path, second_node_pfs: list[dict]) -> Path:
    facts = {"railforge_hw": dgx_h100_facts()}  # hand-set, as the test bed's RDMA nodes are (conftest)
    hosts = {
        NODES[0]: {**facts, "sriov_vfs_pfs": PFS},
        NODES[1]: {**facts, "sriov_vfs_pfs": second_node_pfs},
        CPU_NODE: facts,
    }
    inventory = directory / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"rdma_nodes": {"hosts": hosts}}}}))
    return inventory


@pytest.fixture(scope="module")
def sriov_cluster(control_plane, nad_crd, tmp_path_factory):
    """The NetworkAttachmentDefinition CRD, the system namespace and three Nodes, one with a label of its own."""
    core = client.CoreV1Api(control_plane.api)
    if not core.list_namespace(field_selector=f"metadata.name={SYSTEM_NAMESPACE}").items:
        create_namespace(control_plane, SYSTEM_NAMESPACE)
    for node in (*NODES, CPU_NODE):
        if not core.list_node(field_selector=f"metadata.name={node}").items:
            add_api_node(control_plane, node, {"cpu": "64"}, labels={"example.com/owned-by-someone": "else"})
    second = [{**PFS[0], "pci_address": "0000:3c:00.0"}, {**PFS[1], "num_vfs": 4}, PFS[2]]
    return inventory_file(tmp_path_factory.mktemp("inventory"), second)


def play(plane, inventory: Path, tmp_path: Path, *args: str, **overrides) -> subprocess.CompletedProcess:
    variables = {
        "sriov_network_kubeconfig": str(plane.admin_kubeconfig),
        "sriov_network_namespace": NAMESPACE,
        "sriov_network_system_namespace": SYSTEM_NAMESPACE,
        "sriov_network_cidrs": CIDRS,
        **overrides,
    }
    return run_playbook(
        "playbooks/devices.yml", variables, tmp_path, "--tags", "sriov_network", *args, inventory=inventory
    )


def test_the_role_applies_the_pools_networks_and_daemonsets_idempotently(control_plane, sriov_cluster, tmp_path):
    core = client.CoreV1Api(control_plane.api)
    apps = client.AppsV1Api(control_plane.api)
    custom = client.CustomObjectsApi(control_plane.api)
    nodes = {f"Node {node}" for node in NODES}
    daemonsets = {"DaemonSet sriov-device-plugin", "DaemonSet sriov-cni", "DaemonSet ib-sriov-cni"}

    # check mode: the system namespace's objects and the nodes are dry-run; nothing is created or labelled
    assert changed(play(control_plane, sriov_cluster, tmp_path, "--check")) >= nodes | daemonsets
    assert not core.list_namespace(field_selector=f"metadata.name={NAMESPACE}").items
    assert "railforge.io/sriov" not in core.read_node(NODES[0]).metadata.labels
    assert not apps.list_namespaced_daemon_set(SYSTEM_NAMESPACE).items
    assert [c.metadata.name for c in core.list_namespaced_config_map(SYSTEM_NAMESPACE).items] == ["kube-root-ca.crt"]

    first = changed(play(control_plane, sriov_cluster, tmp_path))
    assert first == {
        f"Namespace {NAMESPACE}",
        "NetworkAttachmentDefinition sriov0",
        "NetworkAttachmentDefinition sriov2",
        "ConfigMap sriov-device-plugin",
        *nodes,
        "ServiceAccount sriov-network",
        *daemonsets,
    }
    assert changed(play(control_plane, sriov_cluster, tmp_path)) == set()  # server-side apply again: nothing changes
    assert changed(play(control_plane, sriov_cluster, tmp_path, "--check")) == set()

    config = json.loads(core.read_namespaced_config_map("sriov-device-plugin", SYSTEM_NAMESPACE).data["config.json"])
    connectx = {"vendors": ["15b3"], "drivers": ["mlx5_core"], "isRdma": True}
    assert config == {
        "resourceList": [
            {
                "resourceName": "sriov0",
                "resourcePrefix": "railforge.io",
                "selectors": {**connectx, "rootDevices": ["0000:3b:00.0", "0000:3c:00.0"], "linkTypes": ["ether"]},
            },
            {
                "resourceName": "sriov1",
                "resourcePrefix": "railforge.io",
                "selectors": {**connectx, "rootDevices": ["0000:86:00.0"], "linkTypes": ["ether"]},
            },
            {
                "resourceName": "sriov2",
                "resourcePrefix": "railforge.io",
                "selectors": {**connectx, "rootDevices": ["0000:af:00.0"], "linkTypes": ["infiniband"]},
            },
        ]
    }

    items = custom.list_namespaced_custom_object(*NAD[:2], NAMESPACE, NAD[2])["items"]
    nads = {n["metadata"]["name"]: n for n in items}
    assert sorted(nads) == ["sriov0", "sriov2"]  # sriov1 has no CIDR, so no network
    assert nads["sriov2"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"] == "railforge.io/sriov2"
    assert json.loads(nads["sriov0"]["spec"]["config"]) == {
        "cniVersion": "0.3.1",
        "name": "sriov0",
        "type": "sriov",
        "ipam": {"type": "whereabouts", "range": "10.120.0.0/16"},
    }
    assert json.loads(nads["sriov2"]["spec"]["config"])["type"] == "ib-sriov"

    for node in NODES:
        labels = core.read_node(node).metadata.labels
        assert labels["railforge.io/sriov"] == "true"
        assert labels["example.com/owned-by-someone"] == "else"  # another manager's label stays
    assert "railforge.io/sriov" not in core.read_node(CPU_NODE).metadata.labels

    # the DaemonSets are applied and read back; nothing runs them here (no registry, no SR-IOV NIC)
    specs = {ds.metadata.name: ds.spec.template.spec for ds in apps.list_namespaced_daemon_set(SYSTEM_NAMESPACE).items}
    assert {name: spec.containers[0].image for name, spec in specs.items()} == {
        "sriov-device-plugin": "ghcr.io/k8snetworkplumbingwg/sriov-network-device-plugin:v3.11.0",
        "sriov-cni": "ghcr.io/k8snetworkplumbingwg/sriov-cni:v2.10.0",
        "ib-sriov-cni": "ghcr.io/k8snetworkplumbingwg/ib-sriov-cni:v1.3.0",  # pool sriov2 is InfiniBand
    }
    plugin = apps.read_namespaced_daemon_set("sriov-device-plugin", SYSTEM_NAMESPACE).spec.template.metadata
    config_json = core.read_namespaced_config_map("sriov-device-plugin", SYSTEM_NAMESPACE).data["config.json"]
    # the pods carry the hash of the pools they read at start: another pool list rolls them
    assert plugin.annotations["railforge.io/config-sha256"] == hashlib.sha256(config_json.encode()).hexdigest()
    for spec in specs.values():
        assert spec.node_selector == {"railforge.io/sriov": "true"}
        assert spec.automount_service_account_token is False
    for installer in ("sriov-cni", "ib-sriov-cni"):
        cni = specs[installer].containers[0].security_context
        assert (cni.privileged, cni.allow_privilege_escalation, cni.capabilities.drop) == (False, False, ["ALL"])
        assert [v.host_path.path for v in specs[installer].volumes] == ["/opt/cni/bin"]
    # least privilege: the DaemonSets' account may read nothing from the API
    account = f"system:serviceaccount:{SYSTEM_NAMESPACE}:sriov-network"
    assert not any(can_i(control_plane, account, verb, what) for verb, what in (("get", "nodes"), ("list", "pods")))


def test_pools_that_disagree_stop_the_role_before_anything_changes(control_plane, sriov_cluster, tmp_path):
    swapped = inventory_file(tmp_path, [PFS[0], PFS[2], PFS[1]])
    words = refused_words(play(control_plane, swapped, tmp_path, sriov_network_namespace="rf-sriov-bad"))
    assert "sriov_vfs_pfs[1]: link_type differs between nodes (eth on rf-sriov-a; ib on rf-sriov-b)" in words
    assert not client.CoreV1Api(control_plane.api).list_namespace(field_selector="metadata.name=rf-sriov-bad").items


def test_a_missing_system_namespace_stops_the_role_before_anything_changes(control_plane, sriov_cluster, tmp_path):
    missing = {"sriov_network_namespace": "rf-sriov-bad", "sriov_network_system_namespace": "rf-sriov-nosuch"}
    words = refused_words(play(control_plane, sriov_cluster, tmp_path, **missing))
    assert "sriov_network_system_namespace: no Namespace rf-sriov-nosuch in the cluster" in words
    core = client.CoreV1Api(control_plane.api)
    assert not core.list_namespace(field_selector="metadata.name=rf-sriov-bad").items
    assert not core.list_namespace(field_selector="metadata.name=rf-sriov-nosuch").items
