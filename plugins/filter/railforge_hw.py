# Railforge - filters turning railforge_hw_facts output into node labels and NCCL environment.
"""Jinja2 filters: railforge_node_labels, railforge_gpu_labels, railforge_nccl_env (see docs/hardware-facts.md)."""

from __future__ import annotations

import re

LABEL_PREFIX = "railforge.io/"
# Architectures whose nvidia.com/gpu.family value (GPU feature discovery's) differs from our lower-case name.
GPU_FAMILY_NAMES = {"ada": "ada-lovelace"}
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def _facts(facts):
    """Accept the module result, its ansible_facts, or the railforge_hw dict itself."""
    if not isinstance(facts, dict):
        raise TypeError(f"railforge filters expect a dict of hardware facts, got {type(facts).__name__}")
    if "ansible_facts" in facts:
        facts = facts["ansible_facts"]
    if "railforge_hw" in facts:
        facts = facts["railforge_hw"]
    return facts


def label_value(value) -> str:
    """Coerce to a valid Kubernetes label value (<= 63 chars, alnum at both ends, [-_.A-Za-z0-9])."""
    if isinstance(value, bool):
        value = "true" if value else "false"
    v = re.sub(r"[^-A-Za-z0-9_.]+", "-", str(value))[:63]
    v = v.strip("-_.")
    if not _LABEL_VALUE.match(v):  # pragma: no cover - defensive; the steps above guarantee a match
        raise ValueError(f"cannot make a label value from {value!r}")
    return v


def _gpu_arch(facts: dict) -> str:
    """The GPUs' architecture in lower case: "mixed" for several, "none" without GPUs."""
    archs = [a for a in facts.get("gpu_architectures", []) if a]
    return "none" if not archs else (archs[0].lower() if len(archs) == 1 else "mixed")


def railforge_node_labels(facts, prefix: str = LABEL_PREFIX) -> dict:
    """Kubernetes node labels from hardware facts.

    Keys (under ``railforge.io/``): gpu-count, gpu-arch (lower case; "mixed" for several, "none"),
    rails (distinct rail HCAs), rdma-link-layer (infiniband / ethernet / mixed / none),
    nvlink (true/false), nvlink-domain ("<cluster-uuid>.<clique>" for multi-node NVLink fabrics,
    "node" for NVLink/NVSwitch inside the node, "none").
    """
    f = _facts(facts)
    layers = [ll.lower() for ll in f.get("rdma_link_layers", [])]
    layer = "none" if not layers else (layers[0] if len(layers) == 1 else "mixed")
    nv = f.get("nvlink") or {}
    present = bool(nv.get("present"))
    fabric = f.get("fabric") or {}
    if fabric.get("clique_id") is not None and fabric.get("cluster_uuid") and fabric.get("status") == "Success":
        domain = f"{fabric['cluster_uuid']}.{fabric['clique_id']}"
    else:
        domain = "node" if present else "none"
    labels = {
        "gpu-count": f.get("gpu_count", 0),
        "gpu-arch": _gpu_arch(f),
        "rails": f.get("rail_count", 0),
        "rdma-link-layer": layer,
        "nvlink": present,
        "nvlink-domain": domain,
    }
    return {prefix + k: label_value(v) for k, v in labels.items()}


def railforge_gpu_labels(facts) -> dict:
    """The GPU labels NVIDIA's GPU feature discovery writes that the hardware facts can tell, under its names.

    nvidia.com/gpu.present ("true" with at least one GPU, else "false"), nvidia.com/gpu.count,
    nvidia.com/gpu.family (the architecture as railforge.io/gpu-arch has it, but Ada as feature discovery names it,
    "ada-lovelace") and, where the driver named the GPUs and they are of one product, nvidia.com/gpu.product (its
    name with a dash for each space, "NVIDIA-H100-80GB-HBM3"; the PCI tree alone has no product names).
    """
    f = _facts(facts)
    count = f.get("gpu_count", 0)
    family = GPU_FAMILY_NAMES.get(_gpu_arch(f), _gpu_arch(f))
    labels = {"gpu.present": count > 0, "gpu.count": count, "gpu.family": family}
    if len(products := f.get("gpu_products") or []) == 1:
        labels["gpu.product"] = products[0]
    return {"nvidia.com/" + k: label_value(v) for k, v in labels.items()}


def railforge_nccl_env(facts, socket_ifname: str | None = None, gid_index: int = 3) -> dict:
    """NCCL environment for the node's rails.

    NCCL_IB_HCA: "=" + "hca:port" per rail in GPU order, each HCA once ("=" = exact names).
    NCCL_SOCKET_IFNAME: "=<iface>" from ``socket_ifname`` or the default-route interface, else
    "^lo,docker" (exclude loopback / docker bridges).  NCCL_IB_GID_INDEX: only when the rails are
    RoCE v2 (Ethernet link layer with a RoCE v2 GID type).  With no rails: NCCL_IB_DISABLE=1.
    """
    f = _facts(facts)
    env = {}
    iface = socket_ifname or f.get("default_interface")
    env["NCCL_SOCKET_IFNAME"] = f"={iface}" if iface else "^lo,docker"
    seen = []
    for r in f.get("rails", []):
        item = f"{r['hca']}:{r.get('port', 1)}"
        if item not in seen:
            seen.append(item)
    if not seen:
        env["NCCL_IB_DISABLE"] = "1"
        return env
    env["NCCL_IB_HCA"] = "=" + ",".join(seen)
    if f.get("roce_v2") and f.get("rdma_link_layers") == ["Ethernet"]:
        env["NCCL_IB_GID_INDEX"] = str(gid_index)
    return env


class FilterModule:
    def filters(self):
        return {
            "railforge_node_labels": railforge_node_labels,
            "railforge_gpu_labels": railforge_gpu_labels,
            "railforge_nccl_env": railforge_nccl_env,
        }
