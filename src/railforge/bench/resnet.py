"""Lines of Railforge's own ResNet-50 synthetic-data benchmark (deploy/openmpi/railforge-resnet50).

The benchmark prints, on rank 0, one progress line per logged step and one result line at the end:

    railforge-resnet50: step=40 images_per_sec=2901.4 gpus=8 ranks=8 hosts=w-0,w-1 batch_per_gpu=32 device=cuda
    railforge-resnet50: result images_per_sec=2893.7 gpus=8 ranks=8 hosts=w-0,w-1 batch_per_gpu=32 device=cuda steps=100

``images_per_sec`` is for the whole job (all ranks); the result line averages the measured steps (warm-up steps
excluded). The CPU fallback prints ``gpus=0 device=cpu`` and its ``ranks``. ``hosts`` are the ranks' host names
(pods), which the node mapping of ``parse_resnet`` turns into nodes; a line may give ``nodes=N`` instead. Keys are
``key=value`` separated by spaces; other lines of the log are ignored, so the lines can be read out of a pod log.
An output with step lines but no result line parses with ``result`` None and ``missing`` saying so; a
railforge-resnet50 line without its required keys, or a result line whose closing ``steps`` is missing or is not
the last step line's step (a cut line), raises ParseError.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from railforge.bench.errors import ParseError

PREFIX = "railforge-resnet50:"
PAIR = re.compile(r"(\w+)=(\S+)")
REQUIRED = ("images_per_sec", "gpus")


@dataclass(frozen=True)
class ResnetMeasure:
    images_per_sec: float
    gpus: int
    nodes: int
    batch_per_gpu: int | None
    step: int | None = None  # progress lines
    steps: int | None = None  # the result line
    device: str = "cuda"
    ranks: int | None = None  # processes: one per GPU, or per CPU worker

    @property
    def on_cpu(self) -> bool:
        return self.device == "cpu"

    @property
    def process_count(self) -> int:
        """The processes the work was split over: GPUs, or CPU ranks on the CPU fallback."""
        if not self.on_cpu:
            return self.gpus
        if self.ranks is None:
            raise ValueError("a CPU fallback measure without its ranks")  # _measure refuses such a line
        return self.ranks

    @property
    def per_process(self) -> float:
        """Images/s per GPU, or per CPU rank on the CPU fallback."""
        return self.images_per_sec / self.process_count

    @property
    def processes(self) -> str:
        unit = "CPU rank" if self.on_cpu else "GPU"
        return f"{self.process_count} {unit}{'s' if self.process_count != 1 else ''}"


@dataclass(frozen=True)
class ResnetRun:
    source: str
    steps: tuple[ResnetMeasure, ...]
    result: ResnetMeasure | None
    missing: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        shape = self.result or self.steps[-1]
        return f"resnet50 {shape.processes} on {shape.nodes} node{'s' if shape.nodes != 1 else ''}"


def _measure(fields: dict[str, str], source: str, lineno: int, line: str, nodes: Mapping[str, str]) -> ResnetMeasure:
    absent = [k for k in REQUIRED if k not in fields]
    if absent:
        raise ParseError(source, lineno, f"{PREFIX} keys {', '.join(REQUIRED)}", line)

    def number(key: str, kind: type):
        if key not in fields:
            return None
        try:
            return kind(fields[key])
        except ValueError:
            raise ParseError(source, lineno, f"{key}=<{kind.__name__}>", line) from None

    device = fields.get("device", "cuda")
    if device not in ("cuda", "cpu"):
        raise ParseError(source, lineno, "device=cuda or device=cpu", line)
    gpus, ranks = number("gpus", int), number("ranks", int)
    if device == "cuda" and gpus < 1:
        raise ParseError(source, lineno, "gpus=<at least 1>", line)
    if device == "cpu" and (ranks is None or ranks < 1):
        raise ParseError(source, lineno, "ranks=<at least 1> on device=cpu", line)
    if "hosts" in fields:
        node_count = len({nodes.get(host, host) for host in fields["hosts"].split(",")})
    else:
        node_count = number("nodes", int) or 1
    return ResnetMeasure(
        images_per_sec=number("images_per_sec", float),
        gpus=gpus,
        nodes=node_count,
        batch_per_gpu=number("batch_per_gpu", int),
        step=number("step", int),
        steps=number("steps", int),
        device=device,
        ranks=ranks,
    )


def parse_resnet(text: str, source: str = "", nodes: Mapping[str, str] | None = None) -> ResnetRun:
    """The benchmark's lines; ``nodes`` maps a host (a pod) to its node (unmapped hosts count as their own)."""
    steps: list[ResnetMeasure] = []
    result: ResnetMeasure | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        at = line.find(PREFIX)
        if at < 0:
            continue
        rest = line[at + len(PREFIX) :]
        fields = dict(PAIR.findall(rest))
        measure = _measure(fields, source, lineno, line, nodes or {})
        if rest.split(None, 1)[0] == "result":
            # The benchmark writes steps= last, and its last step line is at that step: a result line without
            # it, or with fewer steps, was cut.
            if "steps" not in fields:
                raise ParseError(source, lineno, f"{PREFIX} result ... steps=<measured steps> at the end", line)
            if steps and steps[-1].step is not None and measure.steps != steps[-1].step:
                raise ParseError(source, lineno, f"steps={steps[-1].step}, the last step line's step", line)
            result = measure
        else:
            steps.append(measure)
    if result is None and not steps:
        raise ParseError(source, None, f"'{PREFIX} step=... images_per_sec=... gpus=...' lines")
    return ResnetRun(
        source=source,
        steps=tuple(steps),
        result=result,
        missing=() if result else (f"the '{PREFIX} result ...' line (the run did not finish)",),
    )


def scaling_series(runs: Iterable[ResnetRun]) -> dict[str, list[tuple[ResnetRun, ResnetMeasure]]]:
    """The finished runs, each with its result, that scale against each other, fewest processes first: one series
    per device and batch per process (runs of another batch size do not show scaling), named ``GPUs, batch 32`` or
    ``CPU ranks, batch 4``."""
    series: dict[str, list[tuple[ResnetRun, ResnetMeasure]]] = {}
    for run in runs:
        if run.result is not None:
            unit = "CPU ranks" if run.result.on_cpu else "GPUs"
            batch = run.result.batch_per_gpu
            series.setdefault(unit if batch is None else f"{unit}, batch {batch}", []).append((run, run.result))
    return {name: sorted(member, key=lambda finished: finished[1].process_count) for name, member in series.items()}
