"""Start-up times of the Kubernetes test bed: control plane to ready, a real node to Ready, a pod to completion.

    python benchmarks/bench_testbed.py --repeats 5     # as root, after make setup

Prints a Markdown table of medians and ranges. The issue's target: a control plane ready in <= 15 s.
"""

from __future__ import annotations

import argparse
import statistics
import time

from kubernetes import client

from railforge.testbed.controlplane import ControlPlane
from railforge.testbed.node import KubeletNode, one_shot_pod
from railforge.testbed.procs import wait_for


def pod_seconds(plane: ControlPlane, node: KubeletNode, name: str) -> float:
    core = client.CoreV1Api(plane.api)
    started = time.monotonic()
    core.create_namespaced_pod("default", one_shot_pod(name, node.name, ["echo", "ok"]))
    wait_for(name, lambda: core.read_namespaced_pod(name, "default").status.phase == "Succeeded", 60)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    timings: dict[str, list[float]] = {"control plane ready": [], "node Ready": [], "pod start to Succeeded": []}
    for repeat in range(args.repeats):
        with ControlPlane.start() as plane:
            timings["control plane ready"].append(plane.ready_seconds)
            with KubeletNode.start(plane) as node:
                timings["node Ready"].append(node.ready_seconds)
                timings["pod start to Succeeded"].append(pod_seconds(plane, node, f"bench-{repeat}"))
    print(f"| step ({args.repeats} runs) | median s | min s | max s |\n| --- | --- | --- | --- |")
    for step, values in timings.items():
        print(f"| {step} | {statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
