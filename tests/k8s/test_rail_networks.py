"""The rail_networks role (playbooks/network.yml) against the real API server, with two fake nodes carrying the
DGX H100 fixture's facts: check mode changes nothing, the first run applies a NetworkAttachmentDefinition per rail,
the RDMA device plugin's ConfigMap, the NCCL ConfigMaps and the nodes' labels (leaving other managers' labels) with
the inventory's railforge_topology as the first node's fabric labels, a second run and a check run change nothing,
and a bad CIDR or a system namespace the cluster lacks stops the run before anything changes (the CRD files
included)."""

import json
import subprocess
from pathlib import Path

import pytest
from conftest import changed, run_playbook
from k8s_helpers import dgx_h100_facts, refused_words
from kubernetes import client

from railforge.testbed.controlplane import add_api_node, create_namespace

NAMESPACE = "rf-rails-test"
SYSTEM_NAMESPACE = "rf-rails-system"
NODES = ("rf-rails-a", "rf-rails-b")
CIDRS = [f"10.{200 + i}.0.0/16" for i in range(8)]  # clear of the default pod and service networks
# the first node's place in the fabric; its NVLink domain is the inventory's, not the facts' ("node")
TOPOLOGY = {"spine": "spine-a", "leaf": "leaf-01", "nvlink-domain": "nvl-07"}
NAD = ("k8s.cni.cncf.io", "v1", "network-attachment-definitions")


PROBE_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "railprobes.test.railforge.io"},
    "spec": {
        "group": "test.railforge.io",
        "names": {"kind": "RailProbe", "plural": "railprobes"},
        "scope": "Namespaced",
        "versions": [
            {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}
        ],
    },
}


@pytest.fixture(scope="module")
def rail_cluster(control_plane, nad_crd, tmp_path_factory):
    """The pinned Multus release's NetworkAttachmentDefinition CRD, the system namespace, and two Nodes with a label
    of their own; the inventory gives the second node another default-route interface, which is another NCCL class
    where the plays take each node's own interface (rail_networks_nccl_socket_ifname "")."""
    core = client.CoreV1Api(control_plane.api)
    if not core.list_namespace(field_selector=f"metadata.name={SYSTEM_NAMESPACE}").items:
        create_namespace(control_plane, SYSTEM_NAMESPACE)
    for node in NODES:
        if not core.list_node(field_selector=f"metadata.name={node}").items:
            add_api_node(control_plane, node, {"cpu": "64"}, labels={"example.com/owned-by-someone": "else"})
    facts = dgx_h100_facts()
    hosts = {
        NODES[0]: {"railforge_hw": facts, "railforge_topology": TOPOLOGY},
        NODES[1]: {"railforge_hw": {**facts, "default_interface": "bond0"}},
    }
    inventory = tmp_path_factory.mktemp("inventory") / "hosts.yml"
    rdma_nodes = {"hosts": hosts, "vars": {"railforge_rdma_hcas": [rail["hca"] for rail in facts["rails"]]}}
    inventory.write_text(json.dumps({"all": {"children": {"k8s_cluster": {"children": {"rdma_nodes": rdma_nodes}}}}}))
    return inventory


def play(plane, inventory: Path, tmp_path: Path, *args: str, **overrides) -> subprocess.CompletedProcess:
    variables = {
        "rail_networks_kubeconfig": str(plane.admin_kubeconfig),
        "rail_networks_namespace": NAMESPACE,
        "rail_networks_system_namespace": SYSTEM_NAMESPACE,
        "rail_networks_cidrs": CIDRS,
        # each node's own interface, as hostNetwork jobs use (the default is the pods' eth0, alike on every node)
        "rail_networks_nccl_socket_ifname": "",
        **overrides,
    }
    return run_playbook("playbooks/network.yml", variables, tmp_path, *args, inventory=inventory)


def test_the_role_applies_a_network_per_rail_idempotently(control_plane, rail_cluster, tmp_path):
    core = client.CoreV1Api(control_plane.api)
    apps = client.AppsV1Api(control_plane.api)
    custom = client.CustomObjectsApi(control_plane.api)
    nodes = {f"Node {node}" for node in NODES}
    daemonsets = {"DaemonSet multus", "DaemonSet whereabouts", "DaemonSet rdma-shared-device-plugin"}

    # check mode: cluster-wide objects and the system namespace's dry-run; nothing is created or labelled
    assert changed(play(control_plane, rail_cluster, tmp_path, "--check")) >= nodes | daemonsets
    assert not core.list_namespace(field_selector=f"metadata.name={NAMESPACE}").items
    assert "railforge.io/rails" not in core.read_node(NODES[0]).metadata.labels
    assert not apps.list_namespaced_daemon_set(SYSTEM_NAMESPACE).items

    first = changed(play(control_plane, rail_cluster, tmp_path))
    rails = {f"NetworkAttachmentDefinition rail{i}" for i in range(8)}
    assert first >= {f"Namespace {NAMESPACE}", "ConfigMap rdma-shared-device-plugin", *rails, *nodes, *daemonsets}
    assert len({item for item in first if item.startswith("ConfigMap nccl-")}) == 2  # two node classes
    assert changed(play(control_plane, rail_cluster, tmp_path)) == set()  # server-side apply again: nothing changes
    assert changed(play(control_plane, rail_cluster, tmp_path, "--check")) == set()

    nads = custom.list_namespaced_custom_object(*NAD[:2], NAMESPACE, NAD[2])["items"]
    assert sorted(n["metadata"]["name"] for n in nads) == sorted(f"rail{i}" for i in range(8))
    rail5 = next(n for n in nads if n["metadata"]["name"] == "rail5")
    assert rail5["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"] == "rdma/rail5"
    assert json.loads(rail5["spec"]["config"]) == {
        "cniVersion": "0.3.1",
        "name": "rail5",
        "type": "ipoib",
        "master": "ibp192s0",
        "ipam": {"type": "whereabouts", "range": "10.205.0.0/16"},
    }

    config = json.loads(
        core.read_namespaced_config_map("rdma-shared-device-plugin", SYSTEM_NAMESPACE).data["config.json"]
    )
    assert [r["resourceName"] for r in config["configList"]] == [f"rail{i}" for i in range(8)]
    assert config["configList"][0]["selectors"] == {"ifNames": ["ibp24s0"]}
    assert {r["resourcePrefix"] for r in config["configList"]} == {"rdma"}

    labels = {node: core.read_node(node).metadata.labels for node in NODES}
    for node in NODES:
        assert labels[node]["railforge.io/rails"] == "8" and labels[node]["railforge.io/gpu-arch"] == "hopper"
        assert labels[node]["railforge.io/rdma-link-layer"] == "infiniband"
        assert labels[node]["example.com/owned-by-someone"] == "else"  # another manager's label stays
        nccl_class = labels[node]["railforge.io/nccl-class"]
        env = core.read_namespaced_config_map(f"nccl-{nccl_class}", NAMESPACE).data
        assert env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_8:1,mlx5_9:1,mlx5_10:1"
    assert labels[NODES[0]]["railforge.io/nccl-class"] != labels[NODES[1]]["railforge.io/nccl-class"]
    # the inventory's place in the fabric, under a manager of its own; the facts give the other node's NVLink domain
    assert {key: labels[NODES[0]][f"railforge.io/{key}"] for key in TOPOLOGY} == TOPOLOGY
    assert labels[NODES[1]]["railforge.io/nvlink-domain"] == "node" and "railforge.io/leaf" not in labels[NODES[1]]
    second_class = labels[NODES[1]]["railforge.io/nccl-class"]
    assert core.read_namespaced_config_map(f"nccl-{second_class}", NAMESPACE).data["NCCL_SOCKET_IFNAME"] == "=bond0"
    managed = {e.manager for e in core.read_node(NODES[0]).metadata.managed_fields}
    assert {"railforge-rail-networks", "railforge-topology"} <= managed

    # the DaemonSets are applied and read back; nothing runs them here (no CNI plugins, no RDMA devices)
    images = {
        ds.metadata.name: ds.spec.template.spec.containers[0].image
        for ds in apps.list_namespaced_daemon_set(SYSTEM_NAMESPACE).items
    }
    assert images == {
        "multus": "ghcr.io/k8snetworkplumbingwg/multus-cni:v4.2.4",
        "whereabouts": "ghcr.io/k8snetworkplumbingwg/whereabouts:v0.9.2",
        "rdma-shared-device-plugin": "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.3",
    }


def test_a_bad_cidr_stops_the_run_before_anything_changes(control_plane, rail_cluster, tmp_path):
    bad = {"rail_networks_cidrs": [*CIDRS[:7], "10.200.128.0/17"], "rail_networks_namespace": "rf-rails-bad"}
    words = refused_words(play(control_plane, rail_cluster, tmp_path, **bad))
    # refused by the pre-flight, before the stage: the rule's one home
    overlap = "rail_networks_cidrs[0] 10.200.0.0/16 (set in group all) overlaps rail_networks_cidrs[7] 10.200.128.0/17"
    assert overlap in words
    assert not client.CoreV1Api(control_plane.api).list_namespace(field_selector="metadata.name=rf-rails-bad").items


def test_a_missing_system_namespace_stops_the_role_before_its_crd_files_are_applied(
    control_plane, rail_cluster, tmp_path
):
    # a CRD file of its own, which must not be applied either: CRD files go in only once every check has passed
    crd_file = tmp_path / "probe-crd.json"
    crd_file.write_text(json.dumps(PROBE_CRD))
    missing = {
        "rail_networks_namespace": "rf-rails-bad",
        "rail_networks_system_namespace": "rf-rails-nosuch",
        "rail_networks_crd_files": [str(crd_file)],
    }
    words = refused_words(play(control_plane, rail_cluster, tmp_path, **missing))
    assert "rail_networks_system_namespace: no Namespace rf-rails-nosuch in the cluster" in words
    assert not client.CoreV1Api(control_plane.api).list_namespace(field_selector="metadata.name=rf-rails-bad").items
    crds = client.ApiextensionsV1Api(control_plane.api).list_custom_resource_definition().items
    assert PROBE_CRD["metadata"]["name"] not in {crd.metadata.name for crd in crds}
