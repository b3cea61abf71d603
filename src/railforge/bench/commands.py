"""``railforge bench judge``: parse a directory of benchmark outputs, judge them against a hardware class."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub) -> None:
    bench = sub.add_parser("bench", help="benchmark results: parse and judge against floors")
    actions = bench.add_subparsers(dest="bench_command", required=True, metavar="ACTION")
    p = actions.add_parser(
        "judge",
        help="judge nccl-tests / perftest / dcgmi diag / ResNet-50 outputs against a hardware class's floors",
        description="Exit status: 0 all floors met, 1 a floor or check failed, 2 unreadable input.",
    )
    p.add_argument("--results", type=Path, required=True, help="directory of outputs (DIR/<node>/<file> or DIR/<file>)")
    p.add_argument(
        "--class", dest="hw_class", required=True, help="hardware class in floors.yml, e.g. h100-sxm-cx7-ndr"
    )
    p.add_argument("--floors", type=Path, help="YAML overriding the floors (railforge_benchmark_floors: ...)")
    p.add_argument("--json", type=Path, help="write results and verdicts here as JSON")
    p.set_defaults(func=cmd_judge)


def cmd_judge(args: argparse.Namespace) -> int:
    from railforge.bench.errors import ParseError
    from railforge.bench.floors import FloorsError, load_floors, read_overrides
    from railforge.bench.judge import judge, node_table, table, to_json
    from railforge.bench.results import load_results

    if not args.results.is_dir():
        print(f"railforge bench judge: --results {args.results}: expected a directory", file=sys.stderr)
        return 2
    try:
        overrides = read_overrides(args.floors) if args.floors else None
        hw = load_floors(args.hw_class, overrides, origin=str(args.floors) if args.floors else "floors.yml")
        results, skipped = load_results(args.results)
    except (FloorsError, ParseError, OSError) as exc:
        print(f"railforge bench judge: {exc}", file=sys.stderr)
        return 2
    verdicts = judge(results, hw)
    print(f"hardware class {hw.name}: {hw.gpu} / {hw.nic} / {hw.link}")
    print(table(verdicts))
    print()
    print(node_table(verdicts))
    for path in skipped:
        print(f"skipped (not a recognised benchmark output): {path}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(to_json(results, hw, verdicts) + "\n")
    failed = sum(v.status == "fail" for v in verdicts)
    print(f"{failed} failed, {len(verdicts)} verdicts")
    return 1 if failed else 0
