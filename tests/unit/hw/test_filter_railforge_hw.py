"""plugins/filter/railforge_hw.py on facts gathered from the machine shapes."""

from __future__ import annotations

import re

import pytest
from ansible.module_utils.railforge_hwfacts import gather_hw_facts
from railforge_hw import FilterModule, label_value, railforge_gpu_labels, railforge_nccl_env, railforge_node_labels
from shapes import SHAPES, realdata

K8S_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@pytest.fixture(scope="module")
def facts(shape_trees):
    return {n: gather_hw_facts(root) for n, root in shape_trees.items()}


LABELS = {
    "dgx_a100": ("8", "ampere", "8", "infiniband", "true", "node"),
    "dgx_h100": ("8", "hopper", "8", "infiniband", "true", "node"),
    "hgx_h100_12nic": ("8", "hopper", "8", "infiniband", "false", "none"),
    "hgx_h100_12nic_sm_down": ("8", "hopper", "0", "none", "false", "none"),
    "hgx_h100_12nic_sm_partial": ("8", "hopper", "4", "infiniband", "false", "none"),
    "pcie_2gpu": ("2", "ampere", "1", "infiniband", "false", "none"),
    "pcie_4gpu": ("4", "ampere", "2", "infiniband", "false", "none"),
    "roce_node": ("1", "ampere", "1", "ethernet", "false", "none"),
    "mixed_roce_ib": ("1", "ampere", "1", "infiniband", "false", "none"),
    "no_rdma": ("2", "blackwell", "0", "none", "false", "none"),
}

NCCL = {
    "dgx_a100": {
        "NCCL_IB_HCA": "=mlx5_2:1,mlx5_3:1,mlx5_6:1,mlx5_7:1,mlx5_10:1,mlx5_11:1,mlx5_14:1,mlx5_15:1",
        "NCCL_SOCKET_IFNAME": "=bond0",
    },
    "dgx_h100": {
        "NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_8:1,mlx5_9:1,mlx5_10:1",
        "NCCL_SOCKET_IFNAME": "=enp170s0np0",
    },
    "hgx_h100_12nic": {
        "NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1",
        "NCCL_SOCKET_IFNAME": "=eth0",
    },
    # Before the subnet manager is up: no NCCL_IB_HCA of Ethernet management ports, IB off, GID index unset.
    "hgx_h100_12nic_sm_down": {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "=eth0"},
    "hgx_h100_12nic_sm_partial": {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1", "NCCL_SOCKET_IFNAME": "=eth0"},
    "pcie_2gpu": {"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_SOCKET_IFNAME": "=eno1"},
    "pcie_4gpu": {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_SOCKET_IFNAME": "=eno1"},
    "roce_node": {"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_SOCKET_IFNAME": "=eno1", "NCCL_IB_GID_INDEX": "3"},
    "mixed_roce_ib": {"NCCL_IB_HCA": "=mlx5_2:1", "NCCL_SOCKET_IFNAME": "=eno1"},
    "no_rdma": {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "=enp5s0"},
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_node_labels(facts, name):
    labels = railforge_node_labels(facts[name])
    keys = ("gpu-count", "gpu-arch", "rails", "rdma-link-layer", "nvlink", "nvlink-domain")
    assert labels == {f"railforge.io/{k}": v for k, v in zip(keys, LABELS[name], strict=True)}
    assert all(K8S_VALUE.match(v) and len(v) <= 63 for v in labels.values())


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_nccl_env(facts, name):
    assert railforge_nccl_env(facts[name]) == NCCL[name]


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_gpu_labels_agree_with_the_node_labels(facts, name):
    labels = railforge_gpu_labels({"railforge_hw": facts[name]})
    count, arch = LABELS[name][:2]
    assert labels == {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": count, "nvidia.com/gpu.family": arch}


def test_gpu_family_names_ada_as_feature_discovery_does():
    labels = railforge_gpu_labels({"gpu_count": 1, "gpu_architectures": ["Ada"]})
    assert labels["nvidia.com/gpu.family"] == "ada-lovelace"


def test_gpu_product_labelled_where_the_driver_named_one_product():
    hopper = {"gpu_count": 8, "gpu_architectures": ["Hopper"]}
    labels = railforge_gpu_labels({**hopper, "gpu_products": ["NVIDIA H100 80GB HBM3"]})
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"  # as GPU feature discovery writes it
    for products in ([], ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"]):  # no driver yet, or a mixed node
        assert "nvidia.com/gpu.product" not in railforge_gpu_labels({**hopper, "gpu_products": products})


def test_gpu_labels_without_gpus():
    labels = railforge_gpu_labels({"gpu_count": 0, "gpu_architectures": []})
    assert labels == {"nvidia.com/gpu.present": "false", "nvidia.com/gpu.count": "0", "nvidia.com/gpu.family": "none"}


def test_nccl_env_options_and_wrappers(facts):
    f = facts["dgx_h100"]
    assert railforge_nccl_env({"ansible_facts": {"railforge_hw": f}}) == NCCL["dgx_h100"]
    assert railforge_nccl_env({"railforge_hw": f}, socket_ifname="eno3")["NCCL_SOCKET_IFNAME"] == "=eno3"
    no_route = dict(facts["roce_node"], default_interface=None)
    env = railforge_nccl_env(no_route, gid_index=5)
    assert env["NCCL_SOCKET_IFNAME"] == "^lo,docker" and env["NCCL_IB_GID_INDEX"] == "5"
    with pytest.raises(TypeError):
        railforge_nccl_env("not facts")


def test_shared_hca_listed_once(facts):
    # pcie_2gpu: both GPUs use mlx5_0 -> it appears once in NCCL_IB_HCA
    assert railforge_nccl_env(facts["pcie_2gpu"])["NCCL_IB_HCA"] == "=mlx5_0:1"


def test_nvlink_domain_from_fabric(tmp_path):
    f = gather_hw_facts(
        str(tmp_path),
        nvidia_smi_q_text=realdata("nvidia-smi/q-grep-fabric-clique-mnnvl-health-unhealthy.txt"),
    )
    assert railforge_node_labels(f)["railforge.io/nvlink-domain"] == "dc6e40c4-d722-4357-9ba6-5291dd461278.2"
    bad = gather_hw_facts(
        str(tmp_path),
        nvidia_smi_q_text=realdata("nvidia-smi/q-fabric-block-azure-mnnvl-node-insufficient-resources.txt"),
    )
    assert railforge_node_labels(bad)["railforge.io/nvlink-domain"] == "none"  # registration failed


def test_mixed_arch_and_label_value():
    f = {"gpu_architectures": ["Ampere", "Hopper"], "rdma_link_layers": ["Ethernet", "InfiniBand"]}
    labels = railforge_node_labels(f, prefix="example.com/")
    assert labels["example.com/gpu-arch"] == "mixed" and labels["example.com/rdma-link-layer"] == "mixed"
    assert label_value("  weird value!! ") == "weird-value"
    assert label_value("x" * 80) == "x" * 63
    assert label_value(True) == "true"


def test_filter_module_exports():
    assert set(FilterModule().filters()) == {"railforge_node_labels", "railforge_gpu_labels", "railforge_nccl_env"}


def test_link_layers_mixed_only_when_asked(shape_trees):
    """With the Ethernet ports closer to some GPUs than any ACTIVE IB port, only mix_link_layers mixes them."""
    root = shape_trees["hgx_h100_12nic_sm_partial"]
    apart = railforge_nccl_env(gather_hw_facts(root))
    mixed = gather_hw_facts(root, mix_link_layers=True)
    assert mixed["rdma_link_layers"] == ["Ethernet", "InfiniBand"]
    assert set(railforge_nccl_env(mixed)["NCCL_IB_HCA"].lstrip("=").split(",")) == {
        "mlx5_0:1",
        "mlx5_3:1",
        "mlx5_4:1",
        "mlx5_5:1",
        "mlx5_7:1",
        "mlx5_8:1",
    }
    assert "mlx5_7" not in apart["NCCL_IB_HCA"] and "mlx5_8" not in apart["NCCL_IB_HCA"]
