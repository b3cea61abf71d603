"""The rail_networks role's filters (roles/rail_networks/filter_plugins/rail_networks.py) on the facts of the
fixtures' machine shapes: rails, CNI configurations, the RDMA device plugin's config, NCCL classes, every refusal,
and docs/networks.md's generated example."""

from __future__ import annotations

import copy
import importlib.util
import ipaddress
import re
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("networks_example", ROOT / "scripts/networks_example.py")
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)  # also puts the filters and the fixture shapes on sys.path

from rail_networks import (  # noqa: E402
    rail_networks_cni_config,
    rail_networks_nccl_classes,
    rail_networks_rails,
    rail_networks_rdma_config,
)
from railforge_hw import railforge_nccl_env  # noqa: E402

CNI = {"infiniband": "ipoib", "ethernet": "macvlan"}
CIDRS = [f"10.{100 + i}.0.0/16" for i in range(8)]


@pytest.fixture(scope="module")
def facts():
    return {shape: example.shape_facts(shape) for shape in ("dgx_h100", "roce_node", "pcie_2gpu", "no_rdma")}


@pytest.fixture(scope="module")
def dgx(facts):
    return {"dgx-01": facts["dgx_h100"], "dgx-02": facts["dgx_h100"]}


def test_a_dgx_h100_has_eight_infiniband_rails_in_gpu_order(dgx):
    rails = rail_networks_rails(dgx, CIDRS, CNI)
    assert [r["name"] for r in rails] == [f"rail{i}" for i in range(8)]
    assert [r["hcas"] for r in rails] == [
        [h] for h in ("mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_8", "mlx5_9", "mlx5_10")
    ]
    assert rails[0]["netdevs"] == ["ibp24s0"] and rails[7]["netdevs"] == ["ibp220s0"]
    assert rails[0]["pci_addresses"] == ["0000:18:00.0"] and rails[7]["pci_addresses"] == ["0000:dc:00.0"]
    assert {r["link_layer"] for r in rails} == {"infiniband"} and {r["cni_type"] for r in rails} == {"ipoib"}
    assert [r["cidr"] for r in rails] == CIDRS


def test_each_cni_type_names_the_rails_netdev_and_a_whereabouts_range(dgx, facts):
    rail = rail_networks_rails(dgx, CIDRS, CNI)[3]
    assert rail_networks_cni_config(rail) == {
        "cniVersion": "0.3.1",
        "name": "rail3",
        "type": "ipoib",
        "master": "ibp94s0",
        "ipam": {"type": "whereabouts", "range": "10.103.0.0/16"},
    }
    (roce,) = rail_networks_rails({"r1": facts["roce_node"]}, ["192.168.50.0/24"], CNI)
    config = rail_networks_cni_config(roce)
    assert config["type"] == "macvlan" and config["mode"] == "bridge" and config["master"] == roce["netdevs"][0]
    (moved,) = rail_networks_rails({"r1": facts["roce_node"]}, ["fd00:50::/64"], {"ethernet": "host-device"})
    assert rail_networks_cni_config(moved)["device"] == roce["netdevs"][0]
    assert rail_networks_cni_config(moved)["ipam"]["range"] == "fd00:50::/64"


def test_the_rdma_device_plugin_gets_one_resource_per_rail(dgx):
    rails = rail_networks_rails(dgx, CIDRS, CNI)
    by_name = rail_networks_rdma_config(rails, "rdma", "ifNames", 64)
    assert by_name["periodicUpdateInterval"] == 300
    assert len(by_name["configList"]) == 8
    assert by_name["configList"][5] == {
        "resourceName": "rail5",
        "resourcePrefix": "rdma",
        "rdmaHcaMax": 64,
        "selectors": {"ifNames": ["ibp192s0"]},
    }
    by_pci = rail_networks_rdma_config(rails, "nvidia.com", "pciAddresses", 8)["configList"][5]
    assert by_pci["selectors"] == {"pciAddresses": ["0000:c0:00.0"]} and by_pci["resourcePrefix"] == "nvidia.com"


def test_nodes_without_rails_are_left_out(dgx, facts):
    rails = rail_networks_rails({**dgx, "cpu-01": facts["no_rdma"]}, CIDRS, CNI)
    assert len(rails) == 8


def test_nodes_with_identical_nccl_settings_share_one_class_named_by_them(dgx, facts):
    envs = {node: railforge_nccl_env(f) for node, f in {**dgx, "r1": facts["roce_node"]}.items()}
    classes = rail_networks_nccl_classes(envs)
    assert sorted(len(c["nodes"]) for c in classes.values()) == [1, 2]
    dgx_class = next(name for name, c in classes.items() if c["nodes"] == ["dgx-01", "dgx-02"])
    assert classes[dgx_class]["env"]["NCCL_IB_HCA"].startswith("=mlx5_0:1,mlx5_3:1")
    assert rail_networks_nccl_classes(dict(reversed(list(envs.items())))) == classes  # order does not matter
    changed = {**envs, "dgx-02": {**envs["dgx-02"], "NCCL_SOCKET_IFNAME": "=bond0"}}
    assert len(rail_networks_nccl_classes(changed)) == 3
    assert len(dgx_class) == 10 and int(dgx_class, 16) >= 0


@pytest.mark.parametrize(
    ("cidrs", "message"),
    [
        (CIDRS[:7], "rail_networks_cidrs: expected a list of 8 CIDRs, one per rail; got 7"),
        ("10.100.0.0/16", "rail_networks_cidrs: expected a list of 8 CIDRs, one per rail; got str"),
        ([*CIDRS[:7], "10.107.0.1/16"], "rail_networks_cidrs[7]: '10.107.0.1/16' is no network address/prefix"),
        ([*CIDRS[:7], "10.107.0.0/33"], "rail_networks_cidrs[7]: '10.107.0.0/33' is no network address/prefix"),
        (
            [*CIDRS[:7], "10.100.128.0/17"],
            "rail_networks_cidrs[0] 10.100.0.0/16 and rail_networks_cidrs[7] 10.100.128.0/17 overlap",
        ),
    ],
)
def test_bad_cidrs_are_refused_naming_the_variable(dgx, cidrs, message):
    with pytest.raises(AnsibleFilterError, match=re.escape(message)):
        rail_networks_rails(dgx, cidrs, CNI)


def test_mixed_and_malformed_facts_are_refused(dgx, facts):
    with pytest.raises(AnsibleFilterError, match=r"every node needs the same number of rails, got \{\"dgx-01\": 8"):
        rail_networks_rails({**dgx, "small": facts["pcie_2gpu"]}, CIDRS, CNI)
    with pytest.raises(AnsibleFilterError, match="rail 0 is Ethernet and InfiniBand on different nodes"):
        rail_networks_rails({"a": facts["roce_node"], "b": facts["pcie_2gpu"]}, CIDRS[:1], CNI)
    with pytest.raises(AnsibleFilterError, match="node ghost has no railforge_hw facts"):
        rail_networks_rails({**dgx, "ghost": None}, CIDRS, CNI)
    renamed = copy.deepcopy(facts["dgx_h100"])
    renamed["rails"][0]["netdev"] = "ib0"
    with pytest.raises(
        AnsibleFilterError, match="ipoib names the rail's netdev, but rail 0 is ib0, ibp24s0 on different"
    ):
        rail_networks_rails({**dgx, "renamed": renamed}, CIDRS, CNI)
    broken = copy.deepcopy(facts["dgx_h100"])
    del broken["rails"][2]["link_layer"]
    with pytest.raises(AnsibleFilterError, match="node broken has a rail without hca, netdev and link_layer"):
        rail_networks_rails({"broken": broken}, CIDRS, CNI)
    with pytest.raises(AnsibleFilterError, match="rail_networks_nodes: no node has rails"):
        rail_networks_rails({"cpu": facts["no_rdma"]}, [], CNI)


def test_bad_settings_are_refused_naming_the_variable(dgx):
    with pytest.raises(AnsibleFilterError, match=r"rail_networks_cni_types: link layer infiniband .* got 'sriov'"):
        rail_networks_rails(dgx, CIDRS, {"infiniband": "sriov"})
    with pytest.raises(AnsibleFilterError, match="rail_networks_name_prefix: 'Rail_'"):
        rail_networks_rails(dgx, CIDRS, CNI, "Rail_")
    with pytest.raises(AnsibleFilterError, match="rail_networks_rdma_selector: expected ifNames or pciAddresses"):
        rail_networks_rdma_config(rail_networks_rails(dgx, CIDRS, CNI), "rdma", "vendors", 1)


def test_the_example_cidrs_are_separate_networks():
    networks = [ipaddress.ip_network(c) for c in example.CIDRS]
    assert not any(a.overlaps(b) for i, a in enumerate(networks) for b in networks[i + 1 :])


def test_the_docs_example_is_current():
    assert example.main(["--check"]) == 0, "run python scripts/networks_example.py"


def test_the_inventory_check_knows_the_roles_variables():
    spec = importlib.util.spec_from_file_location(
        "railforge_inventory", ROOT / "plugins/module_utils/railforge_inventory.py"
    )
    inventory = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(inventory)
    cidrs = {"type": "list", "elements": "str"}
    assert inventory.check_value("rail_networks_cidrs", CIDRS, cidrs) == []
    problems = inventory.check_value("rail_networks_cidrs", ["10.100.0.0/16", "10.100.0.1/16", "10.100.0.0/16"], cidrs)
    assert problems[0] == (
        "rail_networks_cidrs[1] must be a network address with prefix and no host bits, like 10.100.0.0/16, "
        "got '10.100.0.1/16' (str)"
    )
    assert len(problems) == 2 and "10.100.0.0/16" in problems[1] and "once" in problems[1]
    assert inventory.check_value("rail_networks_rdma_hca_max", 0, {"type": "int"}) == [
        "rail_networks_rdma_hca_max must be between 1 and 10000, got 0"
    ]
    assert inventory.check_value("rail_networks_namespace", "Rails", {"type": "str"})[0].startswith(
        "rail_networks_namespace must be a DNS label"
    )
