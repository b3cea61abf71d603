"""``railforge queue``: the scheduler's gangs as a table, running then waiting, like Slurm's squeue.

Read from the scheduler's own state (its dashboard's ``/api/state``): through the API server's service proxy with a
kubeconfig, or from the dashboard's URL. Nothing is written.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, cast

from railforge.cliargs import UsageError, k8s_name, kube_client, text_file

HEADER = ("QUEUE", "GANG", "STATE", "GPUS", "PODS", "NODES", "START", "REASON")
STATE_PATH = "api/state"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "queue", help="the scheduler's running and waiting gangs, with their start or expected start and reason"
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--kubeconfig", type=text_file, help="through the API server's proxy to the scheduler's Service")
    where.add_argument("--url", type=_url, help="the scheduler's dashboard, e.g. http://127.0.0.1:8480")
    parser.add_argument("--namespace", type=k8s_name, default="railforge-system", help="of the scheduler's Service")
    parser.add_argument("--service", type=k8s_name, default="railforge-scheduler", help="the scheduler's Service")
    parser.add_argument("--queue", help="only this queue's gangs")
    parser.set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    state = _from_cluster(args) if args.kubeconfig is not None else _from_url(args.url)
    if not state.get("leader"):  # a standby knows no gangs; the Service reaches any replica
        leader = state.get("leader_identity") or "not known yet"
        print(f"railforge queue: answered by a standby replica, which schedules nothing; the leader: {leader}",
              file=sys.stderr)  # fmt: skip
    for line in table(rows(state, time.time(), args.queue)):
        print(line)
    return 0


def _url(text: str) -> str:
    try:
        parts = urllib.parse.urlsplit(text)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is no number, an unclosed [IPv6 address
        valid = False
    if not valid:
        raise argparse.ArgumentTypeError(f"expected http://HOST:PORT of the scheduler's dashboard, got {text!r}")
    return text


def _from_url(url: str) -> dict:
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/{STATE_PATH}", timeout=10) as response:
            return _document(response.read(), f"--url {url}")
    except (urllib.error.URLError, OSError) as error:
        raise UsageError(f"--url {url}: the scheduler's dashboard did not answer ({error})") from None


def _from_cluster(args: argparse.Namespace) -> dict:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    api = kube_client(args.kubeconfig)
    where = f"service {args.namespace}/{args.service}"
    try:
        response = client.CoreV1Api(api).connect_get_namespaced_service_proxy_with_path(
            f"{args.service}:http", args.namespace, STATE_PATH, _preload_content=False, _request_timeout=10
        )
        return _document(cast(Any, response).data, where)  # the raw response: _preload_content=False
    except ApiException as error:
        raise UsageError(f"{where}: the scheduler's state is not served ({error.status} {error.reason})") from None
    finally:
        api.close()


def _document(body: bytes, where: str) -> dict:
    try:
        state = json.loads(body)
    except ValueError:
        state = None
    if not isinstance(state, dict) or not {"running", "pending"} <= state.keys():
        raise UsageError(f"{where}: expected the scheduler's state (JSON with running and pending gangs)")
    return state


def rows(state: dict, now: float, queue: str | None = None) -> list[tuple[str, ...]]:
    """One row per gang of the state (``/api/state``): the running ones by start, then the waiting ones in the order
    they were submitted. A waiting gang's START is its expected start (its reservation's, or the plan's for the gangs
    behind the reserved ones), else "-"."""
    found: list[tuple[str, ...]] = []
    for gang in sorted(state["running"], key=lambda gang: gang["started"]):
        started = _when(gang["started"], now)
        found.append(_row(gang, "running", _nodes(gang["nodes"]), gang["pods"], started, ""))
    for gang in state["pending"]:  # already in submission order
        reserved = gang.get("reserved_start")
        state_name = "reserved" if reserved is not None else "waiting"
        nodes = _nodes(gang.get("reserved_nodes") or [])
        expected = gang.get("expected_start")
        if expected is None:  # a state document of a scheduler before expected starts
            expected = reserved
        start = _when(expected, now) if expected is not None else "-"
        found.append(_row(gang, state_name, nodes, gang["pods"], start, gang["reason"]))
    return [row for row in found if queue is None or row[0] == queue]


def _row(gang: dict[str, Any], state: str, nodes: str, pods: int, start: str, reason: str) -> tuple[str, ...]:
    return (gang["queue"] or "-", gang["gang"], state, str(gang["gpus"]), str(pods), nodes or "-", start, reason)


def _nodes(names: list[str]) -> str:
    return ",".join(sorted(names)) if len(names) <= 4 else f"{','.join(sorted(names)[:3])},...(+{len(names) - 3})"


def _when(at: float, now: float) -> str:
    """An instant as UTC with how far it is from now: "2026-11-29T08:14Z (in 4m)", "... (12m ago)"."""
    seconds = round(at - now)
    ago = abs(seconds)
    span = f"{ago}s" if ago < 120 else f"{ago // 60}m" if ago < 7200 else f"{ago // 3600}h{ago % 3600 // 60:02d}m"
    relative = f"in {span}" if seconds > 0 else f"{span} ago"
    return f"{time.strftime('%Y-%m-%dT%H:%M', time.gmtime(at))}Z ({relative})"


def table(found: list[tuple[str, ...]]) -> list[str]:
    """Columns as wide as their widest cell; the reason last, unpadded."""
    lines = [HEADER, *found]
    widths = [max(len(row[column]) for row in lines) for column in range(len(HEADER) - 1)]
    return [
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]]).rstrip()
        for row in lines
    ]
