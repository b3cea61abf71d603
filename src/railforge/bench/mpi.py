"""The CPU fallback's output: ``allreduce`` (deploy/openmpi/allreduce.c) as mpirun prints it on the launcher.

One line per rank (``rank=0 host=bench-worker-0 bytes=8388608 result=ok time_s=0.004``), then rank 0's summary
(``summary ranks=2 bytes=... algbw_GBps=... busbw_GBps=... result=ok``). A rank's host is its pod; a caller that knows
where the pods ran maps them to nodes (``hosts``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from railforge.bench.errors import ParseError
from railforge.lab import RANK_LINE, SUMMARY_LINE


@dataclass(frozen=True)
class MpiRank:
    rank: int
    pod: str
    node: str
    ok: bool
    seconds: float


@dataclass(frozen=True)
class MpiAllreduceRun:
    source: str
    ranks: tuple[MpiRank, ...]
    size_bytes: int
    iterations: int
    seconds: float
    algbw_gbps: float
    busbw_gbps: float
    ok: bool

    @property
    def hosts(self) -> tuple[str, ...]:
        """The nodes the ranks ran on, in rank order, each once."""
        return tuple(dict.fromkeys(rank.node for rank in self.ranks))

    @property
    def label(self) -> str:
        """``mpi_allreduce RxN``: ranks per node x nodes, as ``all_reduce 8x2`` names GPUs per node x nodes."""
        per_node = len(self.ranks) // max(len(self.hosts), 1)
        return f"mpi_allreduce {per_node}x{len(self.hosts)}"


def is_mpi_allreduce(text: str) -> bool:
    return bool(SUMMARY_LINE.search(text) or RANK_LINE.search(text))


def parse_mpi_allreduce(text: str, source: str = "", nodes: Mapping[str, str] | None = None) -> MpiAllreduceRun:
    """The ranks and the summary; ``nodes`` maps a rank's pod to its node (unmapped pods keep their name)."""
    nodes = nodes or {}
    ranks = tuple(
        MpiRank(int(rank), pod, nodes.get(pod, pod), verdict == "ok", float(seconds))
        for rank, pod, _size, verdict, seconds in RANK_LINE.findall(text)
    )
    summary = SUMMARY_LINE.search(text)
    if summary is None:
        found = next((line for line in reversed(text.splitlines()) if line.strip()), "")
        raise ParseError(source, None, "allreduce's 'summary ranks=...' line (the job did not finish)", found)
    count, size, iterations, seconds, algbw, busbw, verdict = summary.groups()
    if len(ranks) != int(count):
        raise ParseError(source, None, f"{count} rank lines before the summary", f"{len(ranks)} rank lines")
    return MpiAllreduceRun(
        source=source,
        ranks=ranks,
        size_bytes=int(size),
        iterations=int(iterations),
        seconds=float(seconds),
        algbw_gbps=float(algbw),
        busbw_gbps=float(busbw),
        ok=verdict == "ok",
    )
