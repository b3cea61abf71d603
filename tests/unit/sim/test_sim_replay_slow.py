"""Full-trace replays (``pytest -m slow``); skipped when the public traces are not beside the repo."""

from __future__ import annotations

from pathlib import Path

import pytest

from railforge.sim.metrics import summarise
from railforge.sim.runner import plan, run_all, sized_shape
from railforge.sim.traces import load_trace

TRACES = Path(__file__).resolve().parents[3].parent / "shared" / "traces"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (TRACES / "README.md").exists(), reason=f"public traces not found at {TRACES}"),
]


def test_itp_cluster01_full_replay():
    trace = load_trace("itp:cluster01", TRACES)
    policies = ["railforge", "strict_fifo", "best_effort_fifo"]
    specs = plan("itp:cluster01", sized_shape(trace), policies, ["exact"], traces_dir=str(TRACES))
    rf, fifo, be = (summarise(r) for r in run_all(specs, show_progress=False))
    for s in (rf, fifo, be):
        assert s["completed"] == len(trace.jobs)
    # best-effort lets small jobs pass the 64-GPU gangs: their tail wait is the worst of the three
    assert be["by_bucket"]["16+"]["wait"]["p99"] > fifo["by_bucket"]["16+"]["wait"]["p99"]
    assert rf["by_bucket"]["16+"]["wait"]["p99"] <= be["by_bucket"]["16+"]["wait"]["p99"]
