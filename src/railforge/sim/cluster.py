"""Simulated cluster shapes.

A cluster is ``nodes`` identical GPU hosts.  Hosts are grouped ``nodes_per_leaf`` to a leaf switch,
leaves ``leaves_per_spine`` to a spine, and ``nvlink_domain`` consecutive hosts (inside one leaf)
share an NVLink domain (1 = NVLink only within a host).  Each node's topology path is
``(spine, leaf, nvlink-domain)``, e.g. ``("spine0", "leaf03", "nvl-0007")``.
"""

from __future__ import annotations

from dataclasses import dataclass

from railforge.scheduler.model import CPU, GPU, MEMORY, Node

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class ClusterShape:
    nodes: int
    gpus_per_node: int = 8
    nodes_per_leaf: int = 16
    leaves_per_spine: int = 8
    nvlink_domain: int = 1
    cpu_per_node: int = 128_000  # millicores
    memory_per_node: int = 1024 * GIB  # bytes

    def __post_init__(self) -> None:
        for name in ("nodes", "gpus_per_node", "nodes_per_leaf", "leaves_per_spine", "nvlink_domain"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.nodes_per_leaf % self.nvlink_domain:
            raise ValueError("nodes_per_leaf must be a multiple of nvlink_domain (a domain sits in one leaf)")

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def describe(self) -> str:
        nvl = "per host" if self.nvlink_domain == 1 else f"{self.nvlink_domain} nodes"
        return (
            f"{self.nodes} nodes x {self.gpus_per_node} GPUs = {self.total_gpus} GPUs; "
            f"{self.nodes_per_leaf} nodes/leaf, {self.leaves_per_spine} leaves/spine, NVLink domain {nvl}"
        )


def build_nodes(shape: ClusterShape) -> list[Node]:
    out: list[Node] = []
    for i in range(shape.nodes):
        leaf = i // shape.nodes_per_leaf
        spine = leaf // shape.leaves_per_spine
        nvl = i // shape.nvlink_domain
        out.append(
            Node(
                name=f"node-{i:04d}",
                allocatable={
                    GPU: shape.gpus_per_node,
                    CPU: shape.cpu_per_node,
                    MEMORY: shape.memory_per_node,
                },
                labels={
                    "railforge.io/spine": f"spine{spine}",
                    "railforge.io/leaf": f"leaf{leaf:02d}",
                    "railforge.io/nvlink-domain": f"nvl-{nvl:04d}",
                },
                topology=(f"spine{spine}", f"leaf{leaf:02d}", f"nvl-{nvl:04d}"),
            )
        )
    return out
