"""The scheduler's dashboard in real headless Chromium (Debian's chromium), against the adapter running on the real
API server: the test submits gangs, lets the page's script draw them, then reads the DOM and saves a screenshot."""

import shutil
import subprocess
import time
from html.parser import HTMLParser

import pytest
import yaml
from conftest import eventually, reserved_in

from railforge.k8s.dashboard import serve

GPU = "nvidia.com/gpu"
QUEUE_LABEL = "railforge.io/queue"
CHROMIUM = shutil.which("chromium")


def chromium(profile, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium with its own profile; the page's script runs for 3 s of virtual time first."""
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}"]
    command += ["--virtual-time-budget=3000", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


class Page(HTMLParser):
    """The dumped DOM: table rows (attributes and cell texts) by table id, and the node cards of the GPU map."""

    def __init__(self, html: str):
        super().__init__()
        self.rows: dict[str, list[tuple[dict, list[str]]]] = {}
        self.nodes: dict[str, dict] = {}
        self.text: list[str] = []
        self._table = self._row = self._cell = self._node = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "table":
            self._table = attributes.get("id")
        elif tag == "tr" and self._table:
            self._row = (attributes, [])
        elif tag == "td" and self._row is not None:
            self._cell = []
        elif tag == "div" and "data-node" in attributes:
            self._node = self.nodes[attributes["data-node"]] = {**attributes, "used_squares": 0, "squares": 0}
        elif tag == "span" and self._node is not None and "gpu" in attributes.get("class", "").split():
            self._node["squares"] += 1
            self._node["used_squares"] += "used" in attributes["class"].split()

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self._row[1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row[1]:  # header rows have th cells only
                self.rows.setdefault(self._table, []).append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def row(self, table: str, key: str, value: str) -> tuple[dict, list[str]]:
        """The one row of ``table`` whose attribute ``key`` is ``value``: its attributes and cell texts."""
        matches = [row for row in self.rows.get(table, []) if row[0].get(key) == value]
        assert len(matches) == 1, (table, value, self.rows.get(table))
        return matches[0]

    def cells(self, table: str, key: str, value: str) -> list[str]:
        return self.row(table, key, value)[1]


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (make setup installs it)")
def test_the_dashboard_shows_queues_gangs_and_the_gpu_map(cluster, run_scheduler, control_plane, tmp_path):
    leaves = {
        leaf: cluster.add_nodes(2, gpus=8, labels={"railforge.io/spine": "s0", "railforge.io/leaf": leaf}, prefix=leaf)
        for leaf in ("l0", "l1")
    }
    team = f"{cluster.name}-team"
    cluster.queue(team, resources={GPU: {"quota": 16}})
    adapter = run_scheduler(cluster.settings())
    server = serve(adapter, "127.0.0.1", 0)
    try:
        labels = {QUEUE_LABEL: team}
        cluster.gang("running", 2, labels=labels, annotations={"railforge.io/runtime": "2h"})
        cluster.wait("the first gang bound", lambda: len(cluster.bound("running")) == 2)
        for name, pods, runtime in (("big", 4, "3h"), ("short", 2, "50m"), ("huge", 5, "1h")):
            if name == "short":  # shaped as an MPIJob: a launcher that asks no GPU, a worker that asks 8
                cluster.podgroup(name, pods, labels=labels, annotations={"railforge.io/runtime": runtime})
                cluster.pod("short-launcher", 0, group=name)
                cluster.pod("short-worker", 8, group=name)
            else:
                cluster.gang(name, pods, labels=labels, annotations={"railforge.io/runtime": runtime})
            time.sleep(1.1)  # creation times a second apart: big is first in line

        def decided() -> str:
            assert len(cluster.bound("short")) == 2
            code = cluster.group_object("huge")["metadata"].get("annotations", {}).get("railforge.io/reason-code")
            reason = cluster.group_object("big")["metadata"].get("annotations", {}).get("railforge.io/reason", "")
            assert code and reason.startswith("reserved to start at"), (code, reason)
            return code

        huge_code = eventually(decided)
        html = chromium(tmp_path / "profile", "--dump-dom", server.url).stdout
        page = Page(html)
        screenshot = tmp_path / "dashboard.png"
        chromium(tmp_path / "profile", f"--screenshot={screenshot}", "--window-size=1400,1200", server.url)
    finally:
        server.stop()

    assert 'data-loaded="true"' in html, html[:2000]  # the script fetched /api/state and drew it
    assert f"leading ({adapter.identity})" in "".join(page.text)
    ns = cluster.name
    # queue: quota 16; 24 GPUs held (running 16 + short 8); 72 wanted (big 32 + huge 40); its fair share is all 32
    assert page.cells("queues", "data-queue", team)[2:7] == ["16", "-", "24", "72", "32"]
    big = page.cells("pending", "data-gang", f"{ns}/big")
    assert big[1:4] == [team, "4", "32"]
    assert 7080 < reserved_in(big[5]) <= 7200, big
    start = big[5].removeprefix("reserved to start at ").split()[0]
    assert big[6].startswith(f"{start} (in ") and big[6].endswith("), reserved on 4 nodes"), big
    huge_attributes, huge = page.row("pending", "data-gang", f"{ns}/huge")
    assert huge[5] == cluster.group_object("huge")["metadata"]["annotations"]["railforge.io/reason"]
    assert huge_attributes["data-reason-code"] == huge_code
    short = page.cells("running", "data-gang", f"{ns}/short")
    assert short[6] == f"borrowed; backfilled past {ns}/big"  # beyond the queue's quota of 16
    running = page.cells("running", "data-gang", f"{ns}/running")
    assert running[2:4] == ["2", "16"] and running[6] == ""
    # the GPU map: every node of the pool under its leaf, 8 squares each, as many used as the GPUs our pods bound
    # there request, as the API has them (short's launcher asks none, wherever it runs)
    requested = {}
    for pod in cluster.pods():
        if pod.spec.node_name:
            gpus = int(pod.spec.containers[0].resources.requests["nvidia.com/gpu"])
            requested[pod.spec.node_name] = requested.get(pod.spec.node_name, 0) + gpus
    for leaf, nodes in leaves.items():
        assert f"s0 / {leaf}" in html
        for node in nodes:
            card = page.nodes[node]
            assert card["squares"] == 8
            assert card["used_squares"] == requested.get(node, 0), (node, card)
    assert sum(card["used_squares"] for card in page.nodes.values() if card["data-node"].startswith(ns)) == 24
    binds = {attributes["data-gang"] for attributes, _ in page.rows["recent"] if attributes["data-kind"] == "bind"}
    assert binds == {f"{ns}/running", f"{ns}/short"}
    # nothing of the credentials the scheduler holds
    kubeconfig = yaml.safe_load(control_plane.admin_kubeconfig.read_text())
    user = kubeconfig["users"][0]["user"]
    for secret in (user.get("client-key-data"), user.get("client-certificate-data"), user.get("token")):
        assert not secret or secret[:40] not in html
    assert "PRIVATE KEY" not in html
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 10_000
