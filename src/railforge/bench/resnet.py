"""Lines of Railforge's own ResNet-50 synthetic-data benchmark (the job of issue #23 item 3; not built yet).

The benchmark prints, on rank 0, one progress line per logged step and one result line at the end:

    railforge-resnet50: step=40 images_per_sec=2901.4 gpus=8 nodes=1 batch_per_gpu=32
    railforge-resnet50: result images_per_sec=2893.7 gpus=8 nodes=1 batch_per_gpu=32 steps=100

``images_per_sec`` is for the whole job (all GPUs); the result line averages the measured steps (warm-up steps
excluded). Keys are ``key=value`` separated by spaces; other lines of the log are ignored, so the lines can
be read out of a pod log. An output with step lines but no result line parses with ``result`` None and
``missing`` saying so; a railforge-resnet50 line without its required keys raises ParseError.
"""

from __future__ import annotations

import re
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

    @property
    def per_gpu(self) -> float:
        return self.images_per_sec / self.gpus


@dataclass(frozen=True)
class ResnetRun:
    source: str
    steps: tuple[ResnetMeasure, ...]
    result: ResnetMeasure | None
    missing: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        shape = self.result or self.steps[-1]
        return f"resnet50 {shape.gpus} GPUs on {shape.nodes} node{'s' if shape.nodes != 1 else ''}"


def _measure(fields: dict[str, str], source: str, lineno: int, line: str) -> ResnetMeasure:
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

    gpus = number("gpus", int)
    if gpus < 1:
        raise ParseError(source, lineno, "gpus=<at least 1>", line)
    return ResnetMeasure(
        images_per_sec=number("images_per_sec", float),
        gpus=gpus,
        nodes=number("nodes", int) or 1,
        batch_per_gpu=number("batch_per_gpu", int),
        step=number("step", int),
        steps=number("steps", int),
    )


def parse_resnet(text: str, source: str = "") -> ResnetRun:
    steps, result = [], None
    for lineno, line in enumerate(text.splitlines(), 1):
        at = line.find(PREFIX)
        if at < 0:
            continue
        rest = line[at + len(PREFIX) :]
        measure = _measure(dict(PAIR.findall(rest)), source, lineno, line)
        if rest.split(None, 1)[0] == "result":
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
