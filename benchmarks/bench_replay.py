"""Time a whole-trace replay through the simulator; prints a Markdown table.

Run: PYTHONPATH=src python benchmarks/bench_replay.py [--trace philly] [--policy railforge]
     [--estimates exact] [--period 0] [--max-jobs N] [--traces-dir ../shared/traces]

Splits the replay time into the scheduler core's ``decide()`` and the simulator's own overhead
(event heap, snapshots, accounting), so a slow replay can be pinned on the right side.  Target:
the whole Philly trace with the default policy in <= 120 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import time

from railforge.sim.runner import RunSpec, simulate, sized_shape
from railforge.sim.traces import Trace, load_trace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="philly")
    ap.add_argument("--traces-dir", default="../shared/traces")
    ap.add_argument("--policy", default="railforge")
    ap.add_argument("--estimates", default="exact")
    ap.add_argument("--period", type=float, default=0.0)
    ap.add_argument("--max-jobs", type=int, default=0, help="replay only the first N jobs")
    args = ap.parse_args()

    t0 = time.perf_counter()
    full = load_trace(args.trace, args.traces_dir)
    load_s = time.perf_counter() - t0
    shape = sized_shape(full)  # sized on the whole trace even when truncated
    trace = Trace(full.name, full.jobs[: args.max_jobs]) if args.max_jobs else full
    spec = RunSpec(args.trace, args.policy, args.estimates, shape, args.traces_dir, period=args.period)
    t1 = time.perf_counter()
    res = simulate(spec, trace)
    total = time.perf_counter() - t1
    c = res.counters
    decide_s = c["decide_seconds"]
    calls = int(c["decide_calls"])
    done = sum(1 for j in res.jobs if j.end is not None)
    print(f"## Replay: {trace.name}, {args.policy} ({args.estimates}), period {args.period:g} s\n")
    print(f"Cluster: {shape.describe()}\n")
    print(
        "| jobs | completed | decide calls | load trace (s) | replay (s) | decide() (s) | "
        "simulator overhead (s) | ms / decide | µs overhead / call |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {len(trace.jobs):,} | {done:,} | {calls:,} | {load_s:.1f} | {total:.1f} | {decide_s:.1f} | "
        f"{total - decide_s:.1f} | {1000 * decide_s / max(calls, 1):.2f} | "
        f"{1e6 * (total - decide_s) / max(calls, 1):.0f} |"
    )
    verdict = "met" if not args.max_jobs and total <= 120 else "n/a (truncated)" if args.max_jobs else "MISSED"
    print(f"\nTarget (whole trace <= 120 s): {verdict}")


if __name__ == "__main__":
    main()
