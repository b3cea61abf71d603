"""How good the expected starts are: a trace replayed through the simulator, each gang's expected start taken when it
first waits (railforge.sim.predictions), against when it really started; with exact runtimes and with the
users' estimates. Prints a Markdown table.

Run: PYTHONPATH=src python benchmarks/bench_expected_start.py [--trace philly] [--max-jobs 3000]
     [--depth 32] [--traces-dir ../shared/traces]
"""

from __future__ import annotations

import argparse
import os
import time

from railforge.sim.predictions import Predictor, accuracy
from railforge.sim.runner import RunSpec, simulate, sized_shape
from railforge.sim.traces import Trace, load_trace


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="philly")
    ap.add_argument("--traces-dir", default="../shared/traces")
    ap.add_argument("--max-jobs", type=int, default=3000, help="replay the first N jobs (0: all)")
    ap.add_argument("--depth", type=int, default=32, help="gangs planned behind the reserved ones")
    args = ap.parse_args()

    full = load_trace(args.trace, args.traces_dir)
    shape = sized_shape(full)  # sized on the whole trace even when truncated
    trace = Trace(full.name, full.jobs[: args.max_jobs]) if args.max_jobs else full
    print(f"## Expected starts: {trace.name}, {len(trace.jobs):,} jobs, depth {args.depth}\n")
    print(f"Cluster: {shape.describe()}; load average before: {os.getloadavg()[0]:.2f}\n")
    print(
        "| runtimes the plan uses | gangs that waited | with an expected start | median error | p90 error | "
        "median wait | replay (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for estimates in ("exact", "user"):
        predictor = Predictor(args.depth)
        started = time.perf_counter()
        result = simulate(RunSpec(args.trace, "railforge", estimates, shape, args.traces_dir), trace, decide=predictor)
        spent = time.perf_counter() - started
        measured = accuracy(predictor.predicted, result.jobs)
        share = measured["predicted"] / measured["waited"] if measured["waited"] else 0.0
        print(
            f"| {estimates} | {measured['waited']:,.0f} | {measured['predicted']:,.0f} ({share:.0%}) | "
            f"{hours(measured['median_error_s'])} | {hours(measured['p90_error_s'])} | "
            f"{hours(measured['median_wait_s'])} | {spent:.0f} |"
        )
    print(f"\nLoad average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
