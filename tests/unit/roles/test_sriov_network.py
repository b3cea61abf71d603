"""The sriov_network role's pools (roles/sriov_network/filter_plugins/sriov_network.py) from the nodes' sriov_vfs_pfs:
one pool per PF position, the device plugin's resourceList, each pool's CNI configuration, the DaemonSets the template
renders, every refusal (named by host and variable), the role stopping before any change, and the inventory check's
rules."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from role_templates import render

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "roles/sriov_network/filter_plugins"))
from sriov_network import (  # noqa: E402
    sriov_network_cni_config,
    sriov_network_device_config,
    sriov_network_pools,
)

ROCE = [
    {"pci_address": "0000:3b:00.0", "num_vfs": 8, "link_type": "eth"},
    {"pci_address": "0000:86:00.0", "num_vfs": 4, "link_type": "eth"},
]
IB = {"pci_address": "0000:af:00.0", "num_vfs": 16, "link_type": "ib"}


def nodes(**per_node) -> dict:
    return {name.replace("_", "-"): pfs for name, pfs in per_node.items()}


def test_pool_i_holds_the_vfs_of_the_ith_pf_on_every_node():
    other = [{**ROCE[0], "pci_address": "0000:3c:00.0"}, {**ROCE[1], "num_vfs": 2}]
    pools = sriov_network_pools(nodes(node_a=ROCE, node_b=other, cpu_01=[]), ["10.120.0.0/16", ""])
    assert pools == [
        {
            "index": 0,
            "name": "sriov0",
            "link_type": "eth",
            "root_devices": ["0000:3b:00.0", "0000:3c:00.0"],
            "vfs": {"node-a": 8, "node-b": 8},
            "cidr": "10.120.0.0/16",
        },
        {
            "index": 1,
            "name": "sriov1",
            "link_type": "eth",
            "root_devices": ["0000:86:00.0"],
            "vfs": {"node-a": 4, "node-b": 2},
            "cidr": "",
        },
    ]


def test_no_node_with_pfs_gives_no_pools():
    assert sriov_network_pools(nodes(cpu_01=[], cpu_02=None), []) == []


def test_the_device_plugin_gets_a_connectx_resource_per_pool_by_pf_and_link_type():
    pools = sriov_network_pools(nodes(node_a=[*ROCE, IB]), [], "vf")
    config = sriov_network_device_config(pools, "railforge.io")
    assert [r["resourceName"] for r in config["resourceList"]] == ["vf0", "vf1", "vf2"]
    assert config["resourceList"][2] == {
        "resourceName": "vf2",
        "resourcePrefix": "railforge.io",
        "selectors": {
            "vendors": ["15b3"],
            "drivers": ["mlx5_core"],
            "rootDevices": ["0000:af:00.0"],
            "linkTypes": ["infiniband"],
            "isRdma": True,
        },
    }
    assert config["resourceList"][0]["selectors"]["linkTypes"] == ["ether"]


def test_ethernet_pools_use_sriov_and_infiniband_pools_ib_sriov_with_a_whereabouts_range():
    eth, _, ib = sriov_network_pools(nodes(node_a=[*ROCE, IB]), ["10.120.0.0/16", "", "fd00:77::/64"])
    assert sriov_network_cni_config(eth) == {
        "cniVersion": "0.3.1",
        "name": "sriov0",
        "type": "sriov",
        "ipam": {"type": "whereabouts", "range": "10.120.0.0/16"},
    }
    assert sriov_network_cni_config(ib)["type"] == "ib-sriov"
    assert sriov_network_cni_config(ib)["ipam"]["range"] == "fd00:77::/64"


def daemonsets(pools: list[dict]) -> dict:
    objects = render("sriov_network", "sriov_network.yaml.j2", sriov_network_pools=pools)
    return {obj["metadata"]["name"]: obj["spec"]["template"]["spec"] for obj in objects if obj["kind"] == "DaemonSet"}


def test_the_ib_sriov_cni_is_installed_only_where_a_pool_is_infiniband():
    assert sorted(daemonsets(sriov_network_pools(nodes(node_a=ROCE), []))) == ["sriov-cni", "sriov-device-plugin"]
    specs = daemonsets(sriov_network_pools(nodes(node_a=[*ROCE, IB]), []))
    assert sorted(specs) == ["ib-sriov-cni", "sriov-cni", "sriov-device-plugin"]
    # each CNI installer only where a pool needs it: an InfiniBand-only cluster gets no sriov-cni
    assert sorted(daemonsets(sriov_network_pools(nodes(node_a=[IB]), []))) == ["ib-sriov-cni", "sriov-device-plugin"]
    (ib_cni,) = specs["ib-sriov-cni"]["containers"]
    assert ib_cni["image"] == "ghcr.io/k8snetworkplumbingwg/ib-sriov-cni:v1.3.0"
    # the image's entrypoint copies its ib-sriov binary into the host directory mounted there
    assert ib_cni["command"] == ["/entrypoint.sh", "--cni-bin-dir=/host/opt/cni/bin"]
    assert ib_cni["volumeMounts"] == [{"name": "cni-bin", "mountPath": "/host/opt/cni/bin"}]
    assert specs["ib-sriov-cni"]["volumes"] == [{"name": "cni-bin", "hostPath": {"path": "/opt/cni/bin"}}]
    assert ib_cni["securityContext"] == {
        "runAsUser": 0,
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert specs["ib-sriov-cni"]["nodeSelector"] == {"railforge.io/sriov": "true"}
    assert specs["ib-sriov-cni"]["automountServiceAccountToken"] is False


def test_a_changed_pool_list_changes_the_device_plugins_pod_template():
    def config_hash(pools: list[dict]) -> str:
        objects = render("sriov_network", "sriov_network.yaml.j2", sriov_network_pools=pools)
        config, plugin = [obj for obj in objects if obj["metadata"]["name"] == "sriov-device-plugin"]
        annotation = plugin["spec"]["template"]["metadata"]["annotations"]["railforge.io/config-sha256"]
        assert annotation == hashlib.sha256(config["data"]["config.json"].encode()).hexdigest()
        return annotation

    roce = sriov_network_pools(nodes(node_a=ROCE), [])
    assert config_hash(roce) == config_hash(sriov_network_pools(nodes(node_a=ROCE), []))
    # another pool, or another PF in a pool: another hash, so the DaemonSet rolls its pods onto the new ConfigMap
    assert config_hash(roce) != config_hash(sriov_network_pools(nodes(node_a=[*ROCE, IB]), []))
    assert config_hash(roce) != config_hash(
        sriov_network_pools(nodes(node_a=ROCE, node_b=[{**ROCE[0], "pci_address": "0000:3c:00.0"}, ROCE[1]]), [])
    )


@pytest.mark.parametrize(
    ("per_node", "message"),
    [
        (
            {"node-a": ROCE, "node-b": ROCE[:1]},
            'every SR-IOV node needs the same number of PFs (pool i is the i-th PF on each node), got {"node-a": 2, '
            '"node-b": 1}',
        ),
        (
            {"node-a": ROCE, "node-b": [ROCE[0], {**ROCE[1], "link_type": "ib"}]},
            "sriov_vfs_pfs[1]: link_type differs between nodes (eth on node-a; ib on node-b); pool sriov1 needs one",
        ),
        (
            {"node-a": ROCE, "node-b": list(reversed(ROCE))},
            "sriov_vfs_pfs[1] of node-a: 0000:86:00.0 is PF 0 on another node",
        ),
        (
            {"node-a": [{"pci_address": "0000:3b:00.0", "num_vfs": 8}]},
            "sriov_vfs_pfs[0] of node-a: link_type must be eth or ib for its SR-IOV pool",
        ),
        ({"node-a": [{**IB, "pci_address": "3b:00.0"}]}, "sriov_vfs_pfs[0] of node-a: expected a pci_address like"),
        ({"node-a": [{**IB, "num_vfs": -1}]}, "sriov_vfs_pfs[0] of node-a: num_vfs must be a count of VFs, got -1"),
        ({"node-a": {"pci_address": "0000:3b:00.0"}}, "sriov_vfs_pfs of node-a: expected a list of PFs, got dict"),
    ],
)
def test_pools_that_disagree_are_refused_naming_host_and_variable(per_node, message):
    with pytest.raises(AnsibleFilterError, match=re.escape(message)):
        sriov_network_pools(per_node, [])


@pytest.mark.parametrize(
    ("cidrs", "message"),
    [
        (["10.120.0.0/16"], "sriov_network_cidrs: expected a list of 2 CIDRs, one per pool; got 1"),
        (["10.120.0.1/16", ""], "sriov_network_cidrs[0]: '10.120.0.1/16' is no network address/prefix"),
        (
            ["10.120.0.0/16", "10.120.128.0/17"],
            "sriov_network_cidrs[0] 10.120.0.0/16 and sriov_network_cidrs[1] 10.120.128.0/17 overlap; expected one "
            "separate range per pool",
        ),
    ],
)
def test_bad_cidrs_are_refused_like_the_rails_ones(cidrs, message):
    with pytest.raises(AnsibleFilterError, match=re.escape(message)):
        sriov_network_pools(nodes(node_a=ROCE), cidrs)


def test_a_prefix_that_is_no_resource_name_and_dns_label_is_refused():
    with pytest.raises(AnsibleFilterError, match="sriov_network_name_prefix: 'sriov_'"):
        sriov_network_pools(nodes(node_a=ROCE), [], "sriov_")


def inventory_of(hosts: dict, tmp_path: Path) -> str:
    inventory = tmp_path / "hosts.json"
    inventory.write_text(json.dumps({"all": {"children": {"rdma_nodes": {"hosts": hosts}}}}))
    return f"{inventory}"


def test_the_role_stops_before_any_change_when_the_pools_disagree(refused, tmp_path):
    hosts = {"node-a": {"sriov_vfs_pfs": ROCE}, "node-b": {"sriov_vfs_pfs": [ROCE[0], {**ROCE[1], "link_type": "ib"}]}}
    output = refused(
        "sriov_network",
        {"sriov_network_kubeconfig": "/nonexistent"},
        "Look up the NetworkAttachmentDefinition CRD",
        inventory=inventory_of(hosts, tmp_path),
    )
    assert "sriov_vfs_pfs[1]: link_type differs between nodes (eth on node-a; ib on node-b)" in " ".join(output.split())


def test_a_node_outside_the_inventory_stops_the_role_naming_it(refused, tmp_path):
    """The namespaces, resource prefix and images are the pre-flight's (test_inventory_cluster_rules.py)."""
    output = refused(
        "sriov_network",
        {"sriov_network_nodes": ["ghost"]},
        "Work out the pools",
        inventory=inventory_of({"node-a": {"sriov_vfs_pfs": ROCE}}, tmp_path),
    )
    assert "(not in the inventory: ghost)" in " ".join(output.split())


def test_the_inventory_check_knows_the_roles_variables():
    sys.path.insert(0, str(ROOT / "plugins/module_utils"))
    import railforge_inventory as inventory

    strings = {"type": "list", "elements": "str"}
    assert inventory.check_value("sriov_network_cidrs", ["10.120.0.0/16", ""], strings) == []
    assert inventory.check_value("sriov_network_cidrs", ["", "10.120.0.1/16"], strings) == [
        "sriov_network_cidrs[1] must be a network address with prefix and no host bits, like 10.100.0.0/16, "
        "got '10.120.0.1/16' (str)"
    ]
    assert inventory.check_value("sriov_network_resource_prefix", "Railforge.io", {"type": "str"})[0].startswith(
        "sriov_network_resource_prefix must be a DNS name like railforge.io"
    )
    assert inventory.check_value("sriov_network_name_prefix", "sriov_", {"type": "str"})[0].startswith(
        "sriov_network_name_prefix must be lowercase letters and digits"
    )
    assert inventory.check_value("versions_sriov_cni", "v2.10.0", {"type": "str"})[0].startswith(
        "versions_sriov_cni must be MAJOR.MINOR.PATCH"
    )
    assert inventory.check_value("sriov_network_ib_cni_image", "ib-sriov-cni", {"type": "str"}) == [
        "sriov_network_ib_cni_image must be an image REGISTRY/NAME:TAG, got 'ib-sriov-cni' (str)"
    ]


def test_without_sr_iov_hosts_the_role_says_so_and_never_calls_the_api(run_role, tmp_path):
    result = run_role(
        "sriov_network",
        {"sriov_network_kubeconfig": "/nonexistent"},
        inventory=inventory_of({"cpu-01": {}, "cpu-02": {"sriov_vfs_pfs": []}}, tmp_path),
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output  # any API call would have failed on the missing kubeconfig
    assert "no host in sriov_network_nodes sets sriov_vfs_pfs; nothing to apply" in " ".join(output.split())
    assert "changed=0" in output
