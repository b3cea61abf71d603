"""Glue: trace + cluster shape + policy + estimate model -> one simulation run."""

from __future__ import annotations

import contextlib
import gc
import math
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

from railforge.scheduler.model import Decisions, SchedulerConfig, Snapshot
from railforge.sim.cluster import ClusterShape, build_nodes
from railforge.sim.engine import SimJob, Simulator
from railforge.sim.estimates import MODELS
from railforge.sim.metrics import SimResult
from railforge.sim.traces import Trace, load_trace, size_for_load
from railforge.sim.workload import build_gang, build_queues

POLICIES = ("railforge", "strict_fifo", "best_effort_fifo", "sjf_oracle")
NO_ESTIMATES = "n/a"


def uses_estimates(policy: str) -> bool:
    """Only a policy that backfills reads ``max_runtime``; the others are run once."""
    return SchedulerConfig.preset(policy).backfill != "none"


@dataclass(frozen=True, slots=True)
class RunSpec:
    trace: str
    policy: str
    estimates: str
    shape: ClusterShape
    traces_dir: str = "../shared/traces"
    failure_rate: float = 0.0
    repair_time: float = 4 * 3600.0
    resync: float = 900.0
    period: float = 0.0
    seed: int = 1
    label: str = ""
    config_overrides: dict = field(default_factory=dict)


def plan(
    trace: str,
    shape: ClusterShape,
    policies: Sequence[str],
    estimates: Sequence[str],
    **kw,
) -> list[RunSpec]:
    unknown = [model for model in estimates if model not in MODELS]
    if unknown:
        raise ValueError(f"unknown estimate model {unknown[0]!r}: use one of {', '.join(MODELS)}")
    runs = []
    for p in policies:
        SchedulerConfig.preset(p, **kw.get("config_overrides", {}))  # fail early on a typo or a bad setting
        models = estimates if uses_estimates(p) else [NO_ESTIMATES]
        runs += [RunSpec(trace, p, e, shape, **kw) for e in models]
    return runs


def sized_shape(trace: Trace, gpus_per_node: int = 8, target_load: float = 0.84, **kw) -> ClusterShape:
    nodes = size_for_load(trace, target_load, gpus_per_node)
    return ClusterShape(nodes=nodes, gpus_per_node=gpus_per_node, **kw)


@contextlib.contextmanager
def _long_lived_heap(young_threshold: int = 10_000) -> Iterator[None]:
    """Tune the garbage collector for a replay. Every job's gang is built before the replay and
    lives through it, while each decide() call allocates tuples by the thousand: with the default
    settings the collector keeps re-scanning the whole trace. Freezing what exists and collecting
    young objects less often cut the Philly replay time by about 30 % (benchmarks/README.md)."""
    threshold = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(young_threshold, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def simulate(
    spec: RunSpec,
    trace: Trace | None = None,
    progress: Callable[[int], None] | None = None,
    decide: Callable[[Snapshot], Decisions] | None = None,
) -> SimResult:
    """Replay ``trace`` (else the spec's, loaded); ``decide``: the core's, or one wrapping it (the default: a fresh
    ``Scheduler``)."""
    if trace is None:
        trace = load_trace(spec.trace, spec.traces_dir)
    shape = spec.shape
    queues = build_queues(trace, shape.total_gpus)
    model = "exact" if spec.estimates == NO_ESTIMATES else spec.estimates
    jobs = [SimJob(build_gang(j, model, shape.gpus_per_node), float(math.ceil(j.duration))) for j in trace.jobs]
    config = SchedulerConfig.preset(spec.policy, **spec.config_overrides)
    t0 = time.perf_counter()
    sim = Simulator(
        build_nodes(shape),
        queues,
        jobs,
        config,
        decide,
        failure_rate=spec.failure_rate,
        repair_time=spec.repair_time,
        resync=spec.resync,
        period=spec.period,
        seed=spec.seed,
        progress=progress,
        trace=trace.name,
        policy=spec.label or spec.policy,
        estimates=spec.estimates,
    )
    with _long_lived_heap():
        res = sim.run()
    res.counters["wall_seconds"] = time.perf_counter() - t0
    return res


def _worker(spec: RunSpec) -> SimResult:
    return simulate(spec)


def run_all(specs: Sequence[RunSpec], workers: int = 1, show_progress: bool = True) -> list[SimResult]:
    """Run every spec (in ``workers`` processes), results in the order of ``specs``."""
    from tqdm import tqdm

    results: list[SimResult | None] = [None] * len(specs)
    if workers <= 1 or len(specs) == 1:
        cache: dict[tuple[str, str], Trace] = {}
        for i, spec in enumerate(specs):
            key = (spec.trace, spec.traces_dir)
            if key not in cache:
                cache[key] = load_trace(spec.trace, spec.traces_dir)
            trace = cache[key]
            desc = f"{trace.name} {spec.policy} ({spec.estimates})"
            with tqdm(total=len(trace.jobs), desc=desc, unit="job", disable=not show_progress) as bar:
                results[i] = simulate(spec, trace, bar.update)
        return results  # type: ignore[return-value]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_worker, s): i for i, s in enumerate(specs)}
        with tqdm(total=len(specs), desc="simulations", unit="run", disable=not show_progress) as bar:
            for fut in as_completed(futures):
                i = futures[fut]
                results[i] = fut.result()
                bar.set_postfix_str(f"{specs[i].trace} {specs[i].policy} done")
                bar.update(1)
    return results  # type: ignore[return-value]
