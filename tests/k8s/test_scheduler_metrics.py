"""/metrics of the railforge scheduler running against the real API server: the values follow from the gangs the
test submits (binds, a reclaim, a gang that never fits), scraped over HTTP and parsed as Prometheus text."""

import time
import urllib.error
import urllib.request

import pytest
from conftest import eventually
from k8s_helpers import scrape, value

from railforge.cli import main
from railforge.k8s.dashboard import serve

GPU = "nvidia.com/gpu"
QUEUE_LABEL = "railforge.io/queue"


@pytest.fixture
def served(run_scheduler):
    """Start the adapter and its HTTP endpoint on a free loopback port; both stop at the end of the test."""
    servers = []

    def start(settings: dict):
        adapter = run_scheduler(settings)
        servers.append(serve(adapter, "127.0.0.1", 0))
        return adapter, servers[-1].url

    yield start
    for server in servers:
        server.stop()


def test_metrics_follow_the_gangs_submitted(cluster, served, capsys):
    cluster.add_nodes(2, gpus=8)
    owner, borrower = f"{cluster.name}-owner", f"{cluster.name}-borrower"
    cluster.queue(owner, resources={GPU: {"quota": 8}})
    cluster.queue(borrower)
    adapter, url = served(cluster.settings(policy={"min_runtime_before_reclaim": 0, "reclaim_cost_limit": None}))
    submitted = time.time()
    for name in ("b0", "b1"):
        cluster.gang(name, 2, gpus=4, labels={QUEUE_LABEL: borrower})
    cluster.wait("the borrowers bound", lambda: len(cluster.bound()) == 4)
    cluster.gang("claim", 1, gpus=8, labels={QUEUE_LABEL: owner})  # takes its quota back from a borrower
    cluster.wait("the claim bound", lambda: cluster.bound("claim"))
    cluster.gang("huge", 3, gpus=8, labels={QUEUE_LABEL: owner})  # 24 GPUs on a 16-GPU pool: never fits

    def huge_told() -> str:
        code = cluster.group_object("huge")["metadata"].get("annotations", {}).get("railforge.io/reason-code")
        assert code, "no reason code on the PodGroup yet"
        return code

    eventually(huge_told)
    elapsed = time.time() - submitted

    def scraped() -> tuple[dict, str]:
        samples, code = scrape(url), huge_told()  # the reason shown on the PodGroup is the one the metric counts
        assert value(samples, "railforge_pending_gangs", queue=owner, reason=code) == 1
        return samples, code

    samples, code = eventually(scraped)
    # quota and what the bound gangs hold: the claim's 8 GPUs, the borrower that was left (2 x 4 GPUs)
    assert value(samples, "railforge_queue_quota", queue=owner, resource=GPU) == 8
    assert value(samples, "railforge_queue_allocated", queue=owner, resource=GPU) == 8
    assert value(samples, "railforge_queue_allocated", queue=borrower, resource=GPU) == 8
    assert value(samples, "railforge_queue_pending", queue=owner, resource=GPU) == 24
    assert value(samples, "railforge_queue_pending", queue=borrower, resource=GPU) == 0
    # 16 GPUs: the owner's quota of 8 first, then the 8 left split 1:1 between the two, both wanting more
    assert value(samples, "railforge_queue_fair_share", queue=owner, resource=GPU) == pytest.approx(12)
    assert value(samples, "railforge_queue_fair_share", queue=borrower, resource=GPU) == pytest.approx(4)
    assert value(samples, "railforge_running_gangs", queue=owner) == 1
    assert value(samples, "railforge_running_gangs", queue=borrower) == 1
    # every pod bound once: 4 borrower pods, the claim's one; one gang evicted, for reclaim
    assert value(samples, "railforge_binds_total", queue=borrower) == 4
    assert value(samples, "railforge_binds_total", queue=owner) == 1
    assert value(samples, "railforge_evicted_gangs_total", reason="reclaim") == 1
    assert value(samples, "railforge_gang_reasons_total", code=code) >= 1
    # three gangs bound whole, each within the test's time (creation times are whole seconds: +1 s)
    for queue, gangs in ((borrower, 2), (owner, 1)):
        assert value(samples, "railforge_gang_scheduling_latency_seconds_count", queue=queue) == gangs
        total = value(samples, "railforge_gang_scheduling_latency_seconds_sum", queue=queue)
        assert 0 <= total <= gangs * (elapsed + 1)
    decided = value(samples, "railforge_decide_duration_seconds_count")
    assert decided >= 3  # at least one pass per submission
    # passes go on while the huge gang waits: the adapter's own count lies between two scrapes
    counted = adapter.state.view().counters["decide_calls"]
    assert decided <= counted <= value(scrape(url), "railforge_decide_duration_seconds_count")
    # every pass is timed whole, one that decided too (the pass under way may not be counted yet)
    passes = value(samples, "railforge_pass_duration_seconds_count")
    assert passes >= decided - 1 >= 2
    assert value(samples, "railforge_pass_duration_seconds_sum") > 0
    assert value(samples, "railforge_leader") == 1

    # railforge queue: the same gangs from the same endpoint, as an operator reads them
    capsys.readouterr()
    assert main(["queue", "--url", url]) == 0
    listed = [line.split(maxsplit=7) for line in capsys.readouterr().out.splitlines()]
    assert listed[0] == ["QUEUE", "GANG", "STATE", "GPUS", "PODS", "NODES", "START", "REASON"]
    by_gang = {fields[1].rsplit("/", 1)[-1]: fields for fields in listed[1:]}
    assert [by_gang[name][2] for name in ("b0", "b1") if name in by_gang].count("running") == 1, listed
    assert by_gang["claim"][:5] == [owner, by_gang["claim"][1], "running", "8", "1"]
    assert by_gang["huge"][:6] == [owner, by_gang["huge"][1], "waiting", "24", "3", "-"]
    assert "24" in by_gang["huge"][7], listed  # its reason names the GPUs it needs


def test_the_endpoint_is_read_only(cluster, served):
    _, url = served(cluster.settings())
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        request = urllib.request.Request(f"{url}/metrics", data=b"{}", method=method)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 405, method
        assert refused.value.headers["Allow"] == "GET, HEAD"
    with urllib.request.urlopen(f"{url}/healthz", timeout=10) as response:
        assert response.read() == b"ok\n"

    def ready() -> None:
        try:
            status = urllib.request.urlopen(f"{url}/readyz", timeout=10).status
        except urllib.error.HTTPError as error:
            status = error.code  # 503 until the caches are synced
        assert status == 200

    eventually(ready)
