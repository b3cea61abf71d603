"""``railforge bench judge``: parse a directory of benchmark outputs, judge them against a hardware class.
``render``, ``collect`` and ``report``: the steps of playbooks/benchmark.yml around its server-side apply."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from railforge.cliargs import (
    UsageError,
    directory,
    k8s_name,
    kube_client,
    output_directory,
    output_file,
    path_component,
    positive_float,
    text_file,
)


def _plan(text: str) -> Path:
    return Path(text) if text == "-" else text_file(text)


def register(sub) -> None:
    bench = sub.add_parser("bench", help="benchmark results: parse and judge against floors")
    actions = bench.add_subparsers(dest="bench_command", required=True, metavar="ACTION")
    p = actions.add_parser(
        "judge",
        help="judge nccl-tests / perftest / dcgmi diag / ResNet-50 outputs against a hardware class's floors",
        description="Exit status: 0 all floors met, 1 a floor or check failed, 2 unreadable input or none to judge.",
    )
    p.add_argument(
        "--results", type=directory, required=True, help="directory of outputs (DIR/<node>/<file> or DIR/<file>)"
    )
    p.add_argument(
        "--class", dest="hw_class", required=True, help="hardware class in floors.yml, e.g. h100-sxm-cx7-ndr"
    )
    p.add_argument("--floors", type=text_file, help="YAML overriding the floors (railforge_benchmark_floors: ...)")
    p.add_argument("--json", type=output_file, help="write results and verdicts here as JSON")
    p.set_defaults(func=cmd_judge)

    p = actions.add_parser("render", help="the benchmark jobs of a plan (playbooks/benchmark.yml's), as YAML")
    p.add_argument("--plan", type=_plan, required=True, help="the plan as JSON or YAML ('-': standard input)")
    p.add_argument(
        "--kubeconfig",
        type=text_file,
        help="the cluster whose nodes must hold the plan's localhost/ images (read once the plan is checked)",
    )
    p.set_defaults(func=cmd_render)

    p = actions.add_parser("collect", help="follow a benchmark run to its end and write its logs")
    p.add_argument("--kubeconfig", type=text_file, required=True)
    p.add_argument("--namespace", type=k8s_name, required=True)
    p.add_argument(
        "--job",
        type=k8s_name,
        action="append",
        required=True,
        help="an MPIJob of the run, once per job; the first names the run (the perftest pods carry it as a label)",
    )
    p.add_argument("--timeout", type=positive_float, default=900, help="seconds to wait for the jobs to end")
    p.add_argument("--results", type=output_directory, required=True, help="directory for the logs and jobs.json")
    p.set_defaults(func=cmd_collect)

    p = actions.add_parser(
        "report",
        help="judge collected results, write reports/benchmark-CLUSTER-TIME.json, .md and .png",
        description="Exit status: 0 every floor met, 1 a floor, check or job failed, 2 bad input.",
    )
    p.add_argument("--results", type=directory, required=True, help="the directory `collect` wrote")
    p.add_argument("--cluster", type=path_component, required=True, help="names the report files")
    p.add_argument("--class", dest="hw_class", required=True, help="hardware class in floors.yml")
    p.add_argument("--floors-json", help="railforge_benchmark_floors as JSON")
    p.add_argument("--reports", type=output_directory, required=True, help="directory of the reports")
    p.set_defaults(func=cmd_report)


def cmd_judge(args: argparse.Namespace) -> int:
    from railforge.bench.errors import ParseError
    from railforge.bench.floors import FloorsError, load_floors, read_overrides
    from railforge.bench.judge import judge, node_table, table, to_json
    from railforge.bench.results import load_results

    try:
        overrides = read_overrides(args.floors) if args.floors else None
        hw = load_floors(args.hw_class, overrides, origin=str(args.floors) if args.floors else "floors.yml")
        results, skipped = load_results(args.results)
    except (FloorsError, ParseError, OSError) as exc:
        raise UsageError(str(exc)) from None
    verdicts = judge(results, hw)
    if not verdicts:  # nothing ran, or not where it was looked for: not a pass
        raise UsageError(
            f"--results {args.results}: no benchmark output to judge ({len(skipped)} files not recognised); expected "
            "nccl-tests, perftest, dcgmi diag or ResNet-50 outputs as DIR/<node>/<file> or DIR/<file>"
        )
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


def cmd_render(args: argparse.Namespace) -> int:
    import yaml

    from railforge.bench.jobs import PlanError, images_on_nodes, plan_from_mapping, render_all

    try:
        text = sys.stdin.read() if str(args.plan) == "-" else args.plan.read_text()
        plan = plan_from_mapping(yaml.safe_load(text))
        notes: list[str] = []
        if args.kubeconfig:
            plan, notes = images_on_nodes(plan, _node_images(args.kubeconfig))
        objects = render_all(plan)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise UsageError(f"--plan {args.plan}: expected a plan as JSON or YAML ({exc})") from None
    except PlanError as exc:
        raise UsageError(str(exc)) from None
    for note in notes:
        print(note, file=sys.stderr)
    print(yaml.safe_dump_all(objects, sort_keys=False), end="")
    return 0


def _node_images(kubeconfig: Path) -> dict[str, list[str]]:
    """Each node's image names, as its kubelet reports them (status.images: the largest 50 by default)."""
    from railforge.k8s import rest

    api = kube_client(kubeconfig)
    try:
        nodes = rest.call(api, "GET", "/api/v1/nodes")["items"]
    finally:
        api.close()
    return {
        node["metadata"]["name"]: [
            name for image in (node.get("status") or {}).get("images") or [] for name in image.get("names") or []
        ]
        for node in nodes
    }


def cmd_collect(args: argparse.Namespace) -> int:
    from railforge.bench.collect import collect

    if (args.results / "outputs").exists():
        raise UsageError(f"--results {args.results}: holds the outputs of an earlier run; expected a new directory")
    api = kube_client(args.kubeconfig)
    try:
        record = collect(api, args.namespace, args.job, args.timeout, args.results)
    finally:
        api.close()
    for mpijob in record["mpijobs"]:
        print(f"MPIJob {mpijob['name']}: {mpijob['state']} after {mpijob['seconds']} s")
        for pod, state in sorted(mpijob["unfinished"].items()):
            print(f"  {pod}: {state}")
    for pod, seen in record["perftest"].items():
        print(f"perftest {pod} on {seen['node']}: {seen['phase']}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    import json

    from railforge.bench.collect import write_report
    from railforge.bench.errors import ParseError
    from railforge.bench.floors import FloorsError, load_floors
    from railforge.bench.judge import node_table

    try:
        overrides = json.loads(args.floors_json) if args.floors_json else None
        hw = load_floors(args.hw_class, overrides or None)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--floors-json: expected JSON ({exc})") from None
    except FloorsError as exc:
        raise UsageError(str(exc)) from None
    try:
        report = write_report(args.results, args.cluster, hw, args.reports)
    except ParseError as exc:
        raise UsageError(f"--results: {exc}") from None
    print(node_table(report.verdicts))
    for path in (report.json_path, report.markdown_path, report.plot_path):
        print(f"wrote {path}")
    for message in report.failures:
        print(f"FAILED {message}")
    print(f"{len(report.failures)} failed, {len(report.verdicts)} verdicts")
    return 1 if report.failures else 0
