"""Small builders shared by the scheduler tests."""

from __future__ import annotations

from railforge.scheduler import GPU, Gang, Member, Node, RunningGang


def nodes(count: int, gpus: int = 8, per_leaf: int = 4, per_nvl: int = 2, prefix: str = "n", **kw) -> list[Node]:
    return [
        Node(
            f"{prefix}{i:02d}",
            {GPU: gpus, "cpu": 64_000},
            topology=("s0", f"leaf{i // per_leaf}", f"nvl{i // per_nvl}"),
            **kw,
        )
        for i in range(count)
    ]


def gang(name: str, pods: int, gpus: int, queue: str = "a", submit: float = 0.0, runtime: float = 3600.0, **kw):
    members = tuple(Member(f"{name}-{j}", {GPU: gpus, "cpu": 1000}) for j in range(pods))
    return Gang(name, queue, members, submit_time=submit, max_runtime=runtime, **kw)


def running(g: Gang, node_names: list[str], start: float = 0.0, borrowed: bool = False, **kw) -> RunningGang:
    placement = {m.name: node for m, node in zip(g.members, node_names, strict=True)}
    end = start + (g.max_runtime if g.max_runtime is not None else float("inf"))
    return RunningGang(g, placement, start, end, borrowed, **kw)
