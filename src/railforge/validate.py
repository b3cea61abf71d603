"""Run the node checks of tests/infra against an inventory and report pass/fail per node.

    python -m railforge.validate --inventory inventories/lab/hosts.yml --json reports/validate.json

The checks are the ones Molecule runs; here they reach each host through the inventory's own Ansible
connection. Prints a table (node x checks passed / failed / skipped, with the failures named) and writes the
same as JSON for machines. With ``--benchmark`` (a report of playbooks/benchmark.yml, or the reports directory and
``--cluster``: its newest), prints instead one table joining per node the checks, the rails, the bandwidth and the
verdict, and the JSON carries the benchmark's part. Exit status 1 when any check failed on any node or the
benchmark failed a floor, a check or a job. With ``--quarantine finish|restart`` each failed node is quarantined
(``railforge.k8s.quarantine``): nothing new is placed there, and its running gangs finish or restart elsewhere.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from testinfra.utils.ansible_runner import AnsibleRunner

from railforge.cliargs import UsageError, kube_client, positive_int
from railforge.k8s import quarantine

# pytest ids look like test_name[podman://host] or test_name[ansible://host-param-...] (tests/infra)
CHECK_ID = re.compile(r"^(?P<check>[^\[]+)\[(?:\w+://)?(?P<params>[^\]]+)\]$")


def parse_junit(path: Path) -> dict[str, dict]:
    """{host: {"passed": [...], "failed": {check: message}, "skipped": {check: reason}}} from a JUnit XML."""
    nodes: dict[str, dict] = defaultdict(lambda: {"passed": [], "failed": {}, "skipped": {}})
    for case in ET.parse(path).getroot().iter("testcase"):
        match = CHECK_ID.match(case.get("name", ""))
        prop = case.find("properties/property[@name='node']")
        host = prop.get("value") if prop is not None else None
        if not match or host is None:
            continue
        node, check = nodes[host], match["check"]
        if params := match["params"].removeprefix(host).removeprefix("-"):
            check += f"[{params}]"
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            node["failed"][check] = (failure.get("message") or "").splitlines()[0][:200]
        elif skipped is not None:
            node["skipped"][check] = skipped.get("message", "")
        else:
            node["passed"].append(check)
    return dict(sorted(nodes.items()))


def table(nodes: dict[str, dict]) -> str:
    lines = [
        "| node | result | passed | failed | skipped | failed checks |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for host, result in nodes.items():
        verdict = "FAIL" if result["failed"] else "PASS"
        failed = ", ".join(result["failed"]) or "-"
        lines.append(
            f"| {host} | {verdict} | {len(result['passed'])} | {len(result['failed'])} | "
            f"{len(result['skipped'])} | {failed} |"
        )
    return "\n".join(lines)


# railforge.bench.collect's names: benchmark-<cluster>-<UTC time>.json
REPORT_NAME = re.compile(r"benchmark-(?P<cluster>.+)-(?P<time>\d{8}T\d{6}Z)\.json")


def benchmark_report(path: Path, cluster: str | None) -> tuple[Path | None, dict]:
    """The benchmark report ``path`` names, or the newest of ``cluster`` (of any, when None) in directory ``path``,
    by the time in its name; (None, {}) if none. Cluster ``lab``'s are not ``lab-b``'s."""
    if path.is_dir() or not path.exists():  # a reports directory no benchmark has made yet holds no report
        found = [
            (named["time"], report)
            for report in path.glob("benchmark-*.json")
            if (named := REPORT_NAME.fullmatch(report.name)) and cluster in (None, named["cluster"])
        ]
        if not found:
            return None, {}
        path = max(found)[1]
    return path, json.loads(path.read_text())


def joined(nodes: dict[str, dict], benchmark: dict) -> dict[str, dict]:
    """Per node (of either side): its checks, its rails and bandwidth in the benchmark, and one verdict."""
    measured = benchmark.get("nodes", {})
    rows = {}
    for host in sorted(set(nodes) | set(measured)):
        checks, bench = nodes.get(host), measured.get(host)
        failed = []
        if checks:
            failed += [f"check {name}" for name in checks["failed"]]
        if bench:
            failed += bench["failed"]
        if failed:
            verdict = "FAIL"
        elif checks and bench:
            verdict = "PASS"
        else:
            verdict = "PASS (checks only)" if checks else "PASS (benchmark only)"
        rows[host] = {
            "checks": checks,
            "rails": bench["rails"] if bench else [],
            "bandwidth": bench["bandwidth"] if bench else [],
            "benchmark_verdict": bench["verdict"] if bench else None,
            "verdict": verdict,
            "failed": failed,
        }
    # a failure of the whole run (a job that did not end) names no node: it fails every node
    orphans = [
        message for message in benchmark.get("failed", []) if not any(message in r["failed"] for r in rows.values())
    ]
    for row in rows.values():
        if orphans:
            row["failed"] += orphans
            row["verdict"] = "FAIL"
    return rows


def joined_table(rows: dict[str, dict]) -> str:
    lines = ["| node | checks | rails | bandwidth | verdict | failed |", "| --- | --- | --- | --- | --- | --- |"]
    for host, row in rows.items():
        checks = row["checks"]
        summary = (
            f"{len(checks['passed'])} passed, {len(checks['failed'])} failed, {len(checks['skipped'])} skipped"
            if checks
            else "-"
        )
        rails = ", ".join(row["rails"]) or "-"
        bandwidth = "; ".join(row["bandwidth"]) or "-"
        failed = "; ".join(row["failed"]) or "-"
        lines.append(f"| {host} | {summary} | {rails} | {bandwidth} | {row['verdict']} | {failed} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="railforge-validate", description=__doc__.splitlines()[0])
    parser.add_argument("--inventory", required=True)
    parser.add_argument("--checks", default=str(Path(__file__).resolve().parents[2] / "tests/infra"))
    parser.add_argument("--json", dest="json_path", help="write the per-node result here")
    parser.add_argument("--limit", default="all", help="inventory host pattern")
    parser.add_argument("--benchmark", type=Path, help="a benchmark report (JSON), or the directory of the reports")
    parser.add_argument("--cluster", help="with a directory --benchmark: the cluster whose newest report to join")
    parser.add_argument(
        "--quarantine",
        choices=("off", *sorted(quarantine.EFFECTS)),
        default="off",
        help="taint each failed node (railforge node quarantine): its running gangs finish, or restart now",
    )
    parser.add_argument("--kubeconfig", default="", help="with --quarantine: the cluster's admin kubeconfig")
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=5,
        help="check this many nodes at once (validate.yml passes Ansible's forks); a node's checks run in order",
    )
    args = parser.parse_args(argv)
    tools = Path(sys.executable).parent  # ansible-inventory beside this Python, when its .venv is not activated
    if (tools / "ansible-inventory").is_file() and str(tools) not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join((str(tools), os.environ.get("PATH", "")))
    try:
        nodes = checked_nodes(args)
    except UsageError as error:
        parser.exit(2, f"railforge-validate: {error}\n")
    return report(nodes, args)


def checked_nodes(args: argparse.Namespace) -> dict[str, dict]:
    """parse_junit's result over the hosts of ``--limit``: one pytest of the checks per host, ``--jobs`` at once (a
    node's checks wait on its connection, not on this machine's CPU). A host with no check run (none collected, or
    pytest stopped before) fails."""
    try:
        hosts = AnsibleRunner(args.inventory).get_hosts(args.limit)
    except (AssertionError, RuntimeError) as error:  # ansible-inventory refused it, or found no file
        raise UsageError(f"--inventory {args.inventory}: {str(error).strip().splitlines()[-1]}") from None
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=args.jobs) as pool:
        junits = [Path(tmp) / f"{index}.xml" for index in range(len(hosts))]
        exits = list(pool.map(_check_node, hosts, junits, [args] * len(hosts)))
        nodes: dict[str, dict] = {}
        for host, junit, returncode in zip(hosts, junits, exits, strict=True):
            did_not_run = {"checks": f"did not run (pytest exited {returncode})"}
            nodes |= (parse_junit(junit) if junit.is_file() else {}) or {
                host: {"passed": [], "failed": did_not_run, "skipped": {}}
            }
    return dict(sorted(nodes.items()))


def _check_node(host: str, junit: Path, args: argparse.Namespace) -> int:
    """The checks of one host into ``junit``; pytest's exit status."""
    command = [sys.executable, "-m", "pytest", args.checks, "-q", "-p", "no:cacheprovider", "-m", ""]
    command += ["--ansible-inventory", args.inventory, f"--junitxml={junit}", "-o", "junit_family=xunit1"]
    env = {**os.environ, "RAILFORGE_INVENTORY": args.inventory, "RAILFORGE_HOSTS": host}
    return subprocess.run(command, env=env, check=False, stdout=subprocess.DEVNULL).returncode


def report(nodes: dict[str, dict], args: argparse.Namespace) -> int:
    """Print and write the checks, joined with the benchmark report where one is named; the exit status."""
    source, benchmark = benchmark_report(args.benchmark, args.cluster) if args.benchmark else (None, {})
    document: Mapping[str, object]
    if source:
        rows = joined(nodes, benchmark)
        print(f"benchmark report: {source} ({benchmark.get('created', '?')})")
        print(joined_table(rows))
        document = {"benchmark_report": str(source), "nodes": rows}
        failing = {host: row["failed"] for host, row in rows.items() if row["failed"]}
    else:
        if args.benchmark:
            print(f"no benchmark report of {args.cluster or 'any cluster'} in {args.benchmark}: checks only")
        print(table(nodes))
        document = nodes
        failing = {host: [f"check {name}" for name in row["failed"]] for host, row in nodes.items() if row["failed"]}
    if args.json_path:
        Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_path).write_text(json.dumps(document, indent=2) + "\n")
    if args.quarantine != "off":
        quarantine_failing(failing, args)
    if not nodes:
        print("no node was checked: is the inventory reachable?", file=sys.stderr)
        return 1
    checks_failed = any(result["failed"] for result in nodes.values())
    return 1 if checks_failed or benchmark.get("failed") else 0


def quarantine_failing(failing: dict[str, list[str]], args: argparse.Namespace) -> None:
    """Quarantine each failed node (its inventory name is its node name), a line each."""
    if not failing:
        return
    if not Path(args.kubeconfig or "-").is_file():
        print(f"quarantine: no kubeconfig {args.kubeconfig!r}; failed nodes left as they are: {', '.join(failing)}")
        return
    try:
        api = kube_client(Path(args.kubeconfig))
    except UsageError as error:
        print(f"quarantine: {error}; failed nodes left as they are: {', '.join(failing)}")
        return
    for host, failed in failing.items():
        try:
            quarantine.quarantine(api, host, failed, args.json_path or "", args.quarantine)
        except UsageError as error:
            print(f"quarantine: {error}")
            continue
        print(
            f"quarantine: node {host} tainted {quarantine.KEY}:{quarantine.EFFECTS[args.quarantine]} "
            f"({'; '.join(failed)}); release it with: railforge node release {host} --kubeconfig {args.kubeconfig}"
        )


if __name__ == "__main__":
    sys.exit(main())
