"""The scheduler's read-only HTTP endpoint: the dashboard page, its JSON state, ``/metrics`` and health checks.

Only GET and HEAD are answered; every other method gets 405, so nothing here changes the cluster. The page shows
what the adapter publishes after each pass (names of queues, gangs and nodes, amounts, reasons) and nothing of
its credentials or settings. ``serve`` binds where it is told: loopback unless the operator says otherwise.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from railforge.k8s.metrics import CONTENT_TYPE, base_unit, fair_share_gpus
from railforge.scheduler import GPU

if TYPE_CHECKING:
    from railforge.k8s.metrics import SchedulerMetrics
    from railforge.k8s.settings import Settings
    from railforge.k8s.views import SchedulerState

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "dashboard_static"
ASSETS = {  # path -> (file, content type)
    "/": ("index.html", "text/html; charset=utf-8"),
    "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    "/dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
}
RECENT_SHOWN = 100


class Source(Protocol):
    """What the endpoint reads of the adapter (railforge.k8s.adapter.Adapter)."""

    settings: Settings
    state: SchedulerState
    metrics: SchedulerMetrics

    def synced(self) -> bool: ...


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as a (host, port) pair; ValueError says what was expected."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not an address; expected HOST:PORT such as 127.0.0.1:8480 or [::1]:8480")
    return host.strip("[]"), int(port)


def _amounts(amounts: dict[str, int]) -> dict[str, float]:
    return {resource: base_unit(resource, amount) for resource, amount in sorted(amounts.items())}


def state_document(adapter: Source) -> dict:
    """What the page shows, as JSON: queues, pending and running gangs, nodes by topology domain, decisions."""
    view = adapter.state.view()
    shares = fair_share_gpus(view)
    on_node: dict[str, list[dict]] = {}
    for running in view.running:
        held: dict[str, dict] = {}  # node -> the gang's pods there and the GPUs they request
        for pod, node in running.placement.items():
            entry = held.setdefault(node, {"gang": running.gang, "pods": 0, "gpus": 0})
            entry["pods"] += 1
            entry["gpus"] += running.member_gpus.get(pod, 0)
        for node, entry in held.items():
            on_node.setdefault(node, []).append(entry)
    domains: dict[str, list[dict]] = {}
    for name in sorted(view.nodes):
        path = view.topology.get(name, ())
        gangs = sorted(on_node.get(name, []), key=lambda entry: entry["gang"])
        domains.setdefault(" / ".join(path) or "no topology labels", []).append(
            {
                "name": name,
                "gpus": view.nodes[name].get(GPU, 0),
                "used_gpus": sum(entry["gpus"] for entry in gangs),
                "gangs": gangs,
            }
        )
    return {
        "scheduler": adapter.settings.scheduler_name,
        "leader": view.leader,
        "leader_identity": view.leader_identity,
        "synced": view.synced,
        "updated": view.updated,
        "last_decide_seconds": view.last_decide_seconds,
        "queues": [
            {
                "name": queue.name,
                "parent": queue.parent,
                "quota": _amounts(queue.quota),
                "limit": _amounts(queue.limit),
                "over_quota_weight": queue.over_quota_weight,
                "allocated": _amounts(queue.allocated),
                "pending": _amounts(queue.pending),
                "fair_share_gpus": round(shares.get(queue.name, 0.0), 3),
            }
            for queue in view.queues
        ],
        "pending": [
            {**asdict(p), "reason": str(p.reason), "reason_code": str(getattr(p.reason, "code", ""))}
            for p in sorted(view.pending, key=lambda p: (p.submitted, p.gang))
        ],
        "running": [
            {
                "gang": r.gang,
                "queue": r.queue,
                "gpus": r.gpus,
                "pods": len(r.placement),
                "nodes": sorted(set(r.placement.values())),
                "started": r.started,
                "borrowed": r.borrowed,
                "backfilled_past": r.backfilled_past,
            }
            for r in sorted(view.running, key=lambda r: r.gang)
        ],
        "domains": [{"path": path, "nodes": nodes} for path, nodes in sorted(domains.items())],
        "problems": view.problems,
        "recent": [asdict(decision) for decision in reversed(view.recent[-RECENT_SHOWN:])],
    }


class _Handler(BaseHTTPRequestHandler):
    adapter: Source  # set on the subclass ``serve`` makes
    server_version = "railforge-scheduler"

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, CONTENT_TYPE, self.adapter.metrics.exposition())
        elif path == "/api/state":
            body = json.dumps(state_document(self.adapter), separators=(",", ":")).encode()
            self._send(200, "application/json", body)
        elif path == "/healthz":
            self._send(200, "text/plain", b"ok\n")
        elif path == "/readyz":
            ready = self.adapter.synced()
            self._send(200 if ready else 503, "text/plain", b"ready\n" if ready else b"caches not synced\n")
        elif path in ASSETS:
            name, content_type = ASSETS[path]
            self._send(200, content_type, (STATIC / name).read_bytes())
        else:
            self._send(404, "text/plain", b"not found\n")

    def do_HEAD(self) -> None:
        self.do_GET()

    def _refuse(self) -> None:
        self._send(405, "text/plain", b"read-only: only GET and HEAD\n", allow="GET, HEAD")

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _refuse

    def _send(self, status: int, content_type: str, body: bytes, allow: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
        self.send_header("X-Content-Type-Options", "nosniff")
        if allow:
            self.send_header("Allow", allow)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:
        log.debug("http %s: " + format, self.client_address[0], *args)


class DashboardServer(ThreadingHTTPServer):
    daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = cast(str, host)  # getsockname() after the bind: an AF_INET(6) host is a str
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class DashboardServer6(DashboardServer):
    address_family = socket.AF_INET6


def serve(adapter: Source, host: str, port: int) -> DashboardServer:
    """Serve the adapter's dashboard and metrics on host:port (port 0: any free one) from a background thread."""
    handler = type("Handler", (_Handler,), {"adapter": adapter})
    server_class = DashboardServer6 if ":" in host else DashboardServer
    server = server_class((host, port), handler)
    threading.Thread(target=server.serve_forever, name="dashboard", daemon=True).start()
    log.info("dashboard and metrics on %s", server.url)
    return server
