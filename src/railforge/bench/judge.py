"""Parsed results + the floors of a hardware class -> verdicts that name what failed.

A verdict's subject is what an operator acts on: a run (``all_reduce 8x2``: GPUs per node x nodes), a node's
rail (``node dgx-03 rail mlx5_4``) or a node (``node dgx-03 dcgmi diag``). Status: ``fail`` (a floor missed,
wrong results, socket fallback, a failed DCGM test), ``warn`` (incomplete output, transport not shown,
validation off), ``pass``, or ``info`` (a figure with no floor for this class).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import PurePath
from typing import TypeVar

from railforge.bench.dcgm import DcgmDiag
from railforge.bench.floors import KINDS, Floor, HardwareClass
from railforge.bench.mpi import MpiAllreduceRun
from railforge.bench.nccl import NcclRun, Row
from railforge.bench.perftest import PerftestRun
from railforge.bench.resnet import ResnetRun, scaling_series

# perftest's "Link type" for the words of a class's link, and a GPU model in its GPU text (H100, A100, L40S ...)
CLASS_LINK_LAYERS = (("InfiniBand", "IB"), ("RoCE", "Ethernet"))
GPU_MODEL = re.compile(r"\b[A-Z]+\d+[A-Z]*\b")
FALLBACK = "NCCL fell back to sockets (NCCL_IB_DISABLE or no RDMA device in the pod)"
STATUSES = ("fail", "warn", "pass", "info")
_Row = TypeVar("_Row")


@dataclass(frozen=True)
class Verdict:
    subject: str
    check: str  # a floor kind, or: complete, correctness, transport, buffers, suspect, dcgmi_diag, resnet50
    status: str  # fail | warn | pass | info
    message: str  # a sentence that starts with the subject
    measured: float | None = None
    limit: float | None = None
    unit: str = ""
    source: str = ""  # where the floor comes from
    nodes: tuple[str, ...] = ()  # the nodes the verdict concerns (a run's hosts, a rail's node)
    rail: str = ""
    log: str = ""  # the output judged


@dataclass(frozen=True)
class Results:
    nccl: tuple[NcclRun, ...] = ()
    perftest: tuple[tuple[str, PerftestRun], ...] = ()  # (node, run): perftest output does not name the host
    dcgm: tuple[tuple[str, DcgmDiag], ...] = ()
    resnet: tuple[ResnetRun, ...] = ()
    mpi: tuple[MpiAllreduceRun, ...] = ()  # the CPU fallback's allreduce


def size_text(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def _floor_bytes(floor: Floor | None, default: int) -> int:
    """The message size ``floor`` is for; ``default`` without a floor (a floor of a sized kind names its size)."""
    return default if floor is None or floor.message_bytes is None else floor.message_bytes


def _pick(rows: Sequence[_Row], size_of: Callable[[_Row], int], message_bytes: int) -> tuple[_Row, str]:
    """The row at the floor's message size (the nearest one above it); else the largest, with a note."""
    above = [r for r in rows if size_of(r) >= message_bytes]
    if above:
        return min(above, key=size_of), ""
    largest = max(rows, key=size_of)
    return largest, f" (largest message {size_text(size_of(largest))} < {size_text(message_bytes)} of the floor)"


def _figure(subject: str, kind: str, hw: HardwareClass, measured: float, what: str, note: str = "") -> Verdict:
    """``measured`` against the class's floor (or ceiling) of ``kind``; ``info`` where the class sets none."""
    spec, floor = KINDS[kind], hw.floors.get(kind)
    if floor is None:
        reason = hw.not_set.get(kind) or "none set"
        message = f"{subject}: {measured:g} {spec.unit} {what} (no floor for {hw.name}: {reason})"
        return Verdict(subject, kind, "info", message, measured, unit=spec.unit)
    ok = measured <= floor.value if spec.ceiling else measured >= floor.value
    relation = ("<=" if ok else ">") if spec.ceiling else (">=" if ok else "<")
    bound = "ceiling" if spec.ceiling else "floor"
    return Verdict(
        subject=subject,
        check=kind,
        status="pass" if ok else "fail",
        message=f"{subject}: {measured:g} {spec.unit} {what} {relation} {floor.value:g} {spec.unit} {bound}{note}",
        measured=measured,
        limit=floor.value,
        unit=spec.unit,
        source=floor.source,
    )


def _incomplete(subject: str, missing: Iterable[str]) -> list[Verdict]:
    missing = tuple(missing)
    if not missing:
        return []
    return [Verdict(subject, "complete", "warn", f"{subject}: output incomplete, missing {'; '.join(missing)}")]


def judge_nccl(run: NcclRun, hw: HardwareClass) -> list[Verdict]:
    subject = run.label
    verdicts = _incomplete(subject, run.missing)
    wrong = [(r, half) for r in run.rows for half in ("out_of_place", "in_place") if getattr(r, half).wrong]
    if wrong:
        row, half = wrong[0]
        count = sum(getattr(r, h).wrong for r, h in wrong)
        verdicts.append(
            Verdict(
                subject,
                "correctness",
                "fail",
                f"{subject}: {count} wrong values, first at {size_text(row.size_bytes)} ({half.replace('_', '-')})",
                count,
            )
        )
    elif run.out_of_bounds:
        verdicts.append(Verdict(subject, "correctness", "fail", f"{subject}: {run.out_of_bounds} out-of-bounds values"))
    elif not run.validation:
        verdicts.append(Verdict(subject, "correctness", "warn", f"{subject}: validation off (-c 0): results unchecked"))
    if len(run.hosts) > 1:
        verdicts.append(_transport(run, subject))
    if run.collective == "all_reduce":
        kind = "nccl_all_reduce_multinode" if len(run.hosts) > 1 else "nccl_all_reduce_1node"
        size = _floor_bytes(hw.floors.get(kind), run.rows[-1].size_bytes)
        row, note = _pick(run.rows, lambda r: r.size_bytes, size)
        if len(run.ranks) == 1:
            verdicts.append(_one_rank(subject, kind, row))
        else:
            busbw = row.out_of_place.busbw_gbps
            what = f"bus bandwidth at {size_text(row.size_bytes)}"
            verdicts.append(_figure(subject, kind, hw, busbw, what, note))
    return [replace(v, nodes=run.hosts, log=run.source) for v in verdicts]


def _one_rank(subject: str, kind: str, row: Row) -> Verdict:
    """A one-GPU all_reduce: its bus bandwidth is 0 by definition (2(n-1)/n of algbw), so no floor applies."""
    algbw = row.out_of_place.algbw_gbps
    message = (
        f"{subject}: one rank sends nothing between GPUs, so its bus bandwidth is 0 by definition; "
        f"{algbw:g} GB/s algorithm bandwidth at {size_text(row.size_bytes)} (within one GPU's memory), not judged"
    )
    return Verdict(subject, kind, "info", message, row.out_of_place.busbw_gbps, unit=KINDS[kind].unit)


def _transport(run: NcclRun, subject: str) -> Verdict:
    if run.socket_fallback:
        return Verdict(subject, "transport", "fail", f"{subject}: {FALLBACK}: {run.socket_fallback}")
    if run.uses_rdma:
        net = [c for c in run.channels if c.transport == "ib"]
        if net and not any(c.gdrdma for c in net):
            return Verdict(subject, "transport", "warn", f"{subject}: NET/IB without GPUDirect RDMA (no GDRDMA path)")
        detail = "with GPUDirect RDMA" if net else "(channel paths not logged)"
        return Verdict(subject, "transport", "pass", f"{subject}: inter-node traffic over NET/IB {detail}")
    return Verdict(
        subject,
        "transport",
        "warn",
        f"{subject}: transport not shown; run with NCCL_DEBUG=INFO to see NET/IB or NET/Socket",
    )


def judge_perftest(node: str, run: PerftestRun, hw: HardwareClass, server: str = "") -> list[Verdict]:
    """The client's figure on its rail (``node`` is the client's; ``server``, where known, the node it measured
    against) against the tool's floor or ceiling."""
    subject = f"node {node} rail {run.device or '?'}"
    against = f", server {server}" if server else ""
    verdicts = _incomplete(subject, run.missing)
    floor = hw.floors.get(run.tool)
    memory = "GPU memory" if run.gpu_memory else "host memory"
    # without a floor: bandwidth at the largest message, latency at the smallest
    if run.bandwidth:
        row, note = _pick(run.bandwidth, lambda r: r.size_bytes, _floor_bytes(floor, run.bandwidth[-1].size_bytes))
        measured, what = row.average_gbps, f"{run.tool} at {size_text(row.size_bytes)}, {memory}{against}"
    else:
        lat_row, note = _pick(run.latency, lambda r: r.size_bytes, _floor_bytes(floor, run.latency[0].size_bytes))
        measured = lat_row.usec["t_typical"] if "t_typical" in lat_row.usec else lat_row.usec["t_avg"]
        what = f"{run.tool} typical at {size_text(lat_row.size_bytes)}{against}"
    verdicts.append(_figure(subject, run.tool, hw, measured, what, note))
    if floor and floor.memory and floor.memory != ("gpu" if run.gpu_memory else "host"):
        wanted = "GPU memory (--use_cuda, GPUDirect RDMA)" if floor.memory == "gpu" else "host memory"
        message = f"{subject}: {run.tool} ran in {memory}, but the {hw.name} floor is for {wanted}"
        verdicts.append(Verdict(subject, "buffers", "warn", message))
    verdicts += _class_mismatches(subject, run, hw)
    return [replace(v, nodes=(node,), rail=run.device, log=run.source) for v in verdicts]


def _class_mismatches(subject: str, run: PerftestRun, hw: HardwareClass) -> list[Verdict]:
    """Warnings where the log contradicts the hardware class it is judged against: its link type, its GPU, a
    DMA-BUF buffer asked for and not confirmed."""
    found = []
    link = run.parameters.get("Link type")
    expected = next((layer for word, layer in CLASS_LINK_LAYERS if word in hw.link), None)
    if link and expected and link != expected:
        message = f"{subject}: the log's link type is {link}, but class {hw.name} is {hw.link}"
        found.append(Verdict(subject, "link", "warn", message))
    model = GPU_MODEL.search(hw.gpu)
    if run.cuda_gpu and model and model[0] not in run.cuda_gpu:
        message = f"{subject}: the log's GPU is {run.cuda_gpu}, but class {hw.name} is for {model[0]}"
        found.append(Verdict(subject, "gpu", "warn", message))
    if run.asked_dma_buf and not run.dma_buf:
        message = (
            f"{subject}: --use_cuda_dmabuf was asked for, but the log does not confirm a DMA-BUF buffer ('using "
            "DMA-BUF for GPU buffer' missing): the figure may not be GPUDirect RDMA through DMA-BUF"
        )
        found.append(Verdict(subject, "dma-buf", "warn", message))
    return found


def rail_suspects(pairs: Sequence[tuple[Verdict, str]]) -> list[Verdict]:
    """Per tool and rail, the node in every failed pair when two or more pairs failed: a ring of pairs measures
    each node twice (as client and as server), so one bad port fails both pairs it is in, and the client
    named by the second is not at fault. ``pairs``: each perftest figure's verdict with its server's node."""
    failed: dict[tuple[str, str], list[set[str]]] = {}
    for verdict, server in pairs:
        if verdict.status == "fail" and server:
            failed.setdefault((verdict.check, verdict.rail), []).append({*verdict.nodes, server})
    suspects = []
    for (tool, rail), members in sorted(failed.items()):
        common = set.intersection(*members)
        if len(members) > 1 and len(common) == 1:
            (node,) = common
            subject = f"node {node} rail {rail}"
            message = f"{subject}: in each of the {len(members)} failed {tool} pairs on this rail, the likely fault"
            suspects.append(Verdict(subject, "suspect", "fail", message, nodes=(node,), rail=rail))
    return suspects


def judge_dcgm(node: str, diag: DcgmDiag) -> list[Verdict]:
    subject = f"node {node} dcgmi diag"
    verdicts = _incomplete(subject, diag.missing)
    failed = diag.failed
    if failed:
        named = "; ".join(
            f"{t.name} failed ({t.scope or 'no GPU named'})" + (f": {t.warnings[0][:160]}" if t.warnings else "")
            for t in failed
        )
        verdicts.append(Verdict(subject, "dcgmi_diag", "fail", f"{subject}: {named}", len(failed)))
    else:
        counts = {s: sum(t.status == s for t in diag.tests) for s in ("Pass", "Skip", "Warn")}
        summary = ", ".join(f"{n} {s.lower()}" for s, n in counts.items() if n)
        verdicts.append(Verdict(subject, "dcgmi_diag", "pass", f"{subject}: no test failed ({summary})"))
    return [replace(v, nodes=(node,), log=diag.source) for v in verdicts]


def judge_resnet(runs: Sequence[ResnetRun], hw: HardwareClass) -> list[Verdict]:
    """Each finished run's throughput (per GPU against the floor; on the CPU fallback, the figure only), and each
    run's scaling efficiency against the run with the fewest processes on the same device and batch size."""
    verdicts, finished = [], []
    for run in runs:
        if run.result is None:
            message = f"{run.label}: missing {run.missing[0]}"
            verdicts.append(Verdict(run.label, "resnet50", "fail", message, log=run.source))
            continue
        finished.append(run)
        if run.result.on_cpu:  # the CPU fallback proves the job's plumbing: its speed is the host's own
            rate = run.result.images_per_sec
            message = f"{run.label}: {rate:g} images/s, {run.result.per_process:.3g} per rank (CPU fallback: no floor)"
            verdicts.append(Verdict(run.label, "resnet50", "info", message, rate, unit="images/s", log=run.source))
        else:
            figure = _figure(run.label, "resnet50_per_gpu", hw, run.result.per_process, "throughput")
            verdicts.append(replace(figure, log=run.source))
    for series in scaling_series(finished).values():
        _, base = series[0]
        for run, result in series[1:]:
            if result.process_count == base.process_count:
                continue
            efficiency = round(result.per_process / base.per_process, 4)
            what = f"scaling efficiency vs {base.processes}"
            verdicts.append(replace(_figure(run.label, "resnet50_scaling", hw, efficiency, what), log=run.source))
    return verdicts


def judge_mpi(run: MpiAllreduceRun, hw: HardwareClass) -> list[Verdict]:
    """The CPU fallback's allreduce: every rank's sum checked by the program itself, bus bandwidth against
    ``mpi_allreduce``."""
    subject = run.label
    verdicts = []
    wrong = [rank for rank in run.ranks if not rank.ok]
    if wrong or not run.ok:
        named = ", ".join(f"rank {rank.rank} ({rank.node})" for rank in wrong) or "the summary"
        verdicts.append(Verdict(subject, "correctness", "fail", f"{subject}: wrong sums on {named}", len(wrong)))
    floor_bytes = _floor_bytes(hw.floors.get("mpi_allreduce"), run.size_bytes)
    note = ""
    if floor_bytes > run.size_bytes:
        note = f" (message {size_text(run.size_bytes)} < {size_text(floor_bytes)} of the floor)"
    what = f"bus bandwidth at {size_text(run.size_bytes)}"
    verdicts.append(_figure(subject, "mpi_allreduce", hw, run.busbw_gbps, what, note))
    return [replace(v, nodes=run.hosts, log=run.source) for v in verdicts]


def judge(results: Results, hw: HardwareClass, servers: Mapping[str, str] | None = None) -> list[Verdict]:
    """Every result against the class; ``servers`` maps a perftest client's log (its source) to its server's node."""
    servers = servers or {}
    verdicts = [v for run in results.nccl for v in judge_nccl(run, hw)]
    verdicts += [v for run in results.mpi for v in judge_mpi(run, hw)]
    pairs = []  # each rail figure with its server's node
    for node, run in results.perftest:
        server = servers.get(run.source, "")
        for verdict in judge_perftest(node, run, hw, server):
            verdicts.append(verdict)
            if verdict.check == run.tool:
                pairs.append((verdict, server))
    verdicts += rail_suspects(pairs)
    verdicts += [v for node, diag in results.dcgm for v in judge_dcgm(node, diag)]
    return verdicts + judge_resnet(results.resnet, hw)


def table(verdicts: Sequence[Verdict]) -> str:
    """Markdown: one line per verdict, failures first, then by subject (node / rail / run)."""
    lines = [
        "| verdict | subject | check | measured | limit | floor from | log | detail |",
        "| --- | --- | --- | ---: | ---: | --- | --- | --- |",
    ]
    for v in sorted(verdicts, key=lambda v: (STATUSES.index(v.status), v.subject, v.check)):
        measured = "-" if v.measured is None else f"{v.measured:g} {v.unit}".strip()
        limit = "-" if v.limit is None else f"{v.limit:g} {v.unit}".strip()
        detail = v.message.removeprefix(f"{v.subject}: ")
        log = PurePath(v.log).name if v.log else "-"
        cells = (v.status.upper(), v.subject, v.check, measured, limit, v.source or "-", log, detail)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def node_table(verdicts: Sequence[Verdict]) -> str:
    """Markdown: one line per node, its rails, its worst verdict and what failed there."""
    nodes: dict[str, list[Verdict]] = {}
    for verdict in verdicts:
        for node in verdict.nodes:
            nodes.setdefault(node, []).append(verdict)
    lines = ["| node | rails | verdict | failed |", "| --- | --- | --- | --- |"]
    for node, own in sorted(nodes.items()):
        rails = ", ".join(sorted({v.rail for v in own if v.rail})) or "-"
        worst = min((v.status for v in own), key=STATUSES.index)
        where = [v.rail or ("" if v.subject.startswith(f"node {node} ") else v.subject) for v in own]
        failures = [f"{w} {v.check}".strip() for w, v in zip(where, own, strict=True) if v.status == "fail"]
        lines.append(f"| {node} | {rails} | {worst.upper()} | {'; '.join(dict.fromkeys(failures)) or '-'} |")
    return "\n".join(lines)


def to_json(results: Results, hw: HardwareClass, verdicts: Sequence[Verdict]) -> str:
    return json.dumps(
        {
            "hardware_class": asdict(hw),
            "results": asdict(results),
            "verdicts": [asdict(v) for v in verdicts],
            "failed": sum(v.status == "fail" for v in verdicts),
        },
        indent=2,
    )
