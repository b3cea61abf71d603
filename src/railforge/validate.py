"""Run the node checks of tests/infra against an inventory and report pass/fail per node.

    python -m railforge.validate --inventory inventories/lab/hosts.yml --json reports/validate.json

The checks are the ones Molecule runs; here they reach each host through the inventory's own Ansible
connection. Prints a table (node x checks passed / failed / skipped, with the failures named) and writes the
same as JSON for machines. Exit status 1 when any check failed on any node.
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
from pathlib import Path

# pytest ids look like test_name[ansible://host] for a testinfra host parameter.
HOST_ID = re.compile(r"^(?P<check>[^\[]+)\[(?:\w+://)?(?P<host>[^\]]+)\]$")


def parse_junit(path: Path) -> dict[str, dict]:
    """{host: {"passed": [...], "failed": {check: message}, "skipped": {check: reason}}} from a JUnit XML."""
    nodes: dict[str, dict] = defaultdict(lambda: {"passed": [], "failed": {}, "skipped": {}})
    for case in ET.parse(path).getroot().iter("testcase"):
        match = HOST_ID.match(case.get("name", ""))
        if not match:
            continue
        node, check = nodes[match["host"]], match["check"]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="railforge-validate", description=__doc__.splitlines()[0])
    parser.add_argument("--inventory", required=True)
    parser.add_argument("--checks", default=str(Path(__file__).resolve().parents[2] / "tests/infra"))
    parser.add_argument("--json", dest="json_path", help="write the per-node result here")
    parser.add_argument("--limit", default="all", help="inventory host pattern")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        env = {**os.environ, "RAILFORGE_INVENTORY": args.inventory, "RAILFORGE_HOSTS": args.limit}
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                args.checks,
                "-q",
                "-p",
                "no:cacheprovider",
                "-m",
                "",
                "--ansible-inventory",
                args.inventory,
                f"--junitxml={junit}",
                "-o",
                "junit_family=xunit1",
            ],
            env=env,
            check=False,
            stdout=subprocess.DEVNULL,
        )
        nodes = parse_junit(junit)
    print(table(nodes))
    if args.json_path:
        Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_path).write_text(json.dumps(nodes, indent=2) + "\n")
    if not nodes:
        print("no node was checked: is the inventory reachable?", file=sys.stderr)
        return 1
    return 1 if any(result["failed"] for result in nodes.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
