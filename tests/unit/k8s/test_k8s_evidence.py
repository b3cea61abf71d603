"""What a failed member's evidence says, from the pod as the API serves it (the test bed shows it written)."""

from railforge.k8s.evidence import describe, failed_container, termination


def failed_pod(containers=(), reason=None, message=None) -> dict:
    status = {"phase": "Failed", "containerStatuses": list(containers)}
    status.update({key: value for key, value in (("reason", reason), ("message", message)) if value})
    return {"metadata": {"name": "job-worker-1", "namespace": "team"}, "status": status}


def container(name: str, state: dict | None = None, last: dict | None = None) -> dict:
    return {"name": name, "state": state or {}, "lastState": last or {}}


def test_the_container_that_ended_non_zero_is_named_with_its_exit_code():
    sidecar = container("metrics", {"terminated": {"exitCode": 0, "reason": "Completed"}})
    worker = container("worker", {"terminated": {"exitCode": 3, "reason": "Error", "message": "rank 1: bad input\n"}})
    assert termination(failed_pod([sidecar, worker])) == "container worker exited 3 (Error): rank 1: bad input"
    restarted = container("worker", {"running": {}}, last={"terminated": {"exitCode": 137, "reason": "OOMKilled"}})
    assert termination(failed_pod([restarted])) == "container worker exited 137 (OOMKilled)"
    # the log to read is the ended run's (previous), not the one running since
    assert failed_container(failed_pod([restarted]))[::2] == ("worker", True)
    assert failed_container(failed_pod([sidecar, worker]))[::2] == ("worker", False)


def test_a_pod_without_a_container_exit_says_the_pods_own_reason():
    evicted = failed_pod(reason="Evicted", message="The node was low on resource: memory.")
    assert termination(evicted) == "Evicted: The node was low on resource: memory."
    assert termination(failed_pod()) == "failed (its status gives no exit code)"


def test_the_evidence_puts_the_ending_first_and_the_log_after_it():
    worker = container("worker", {"terminated": {"exitCode": 3, "reason": "Error"}})
    text = describe(failed_pod([worker]), "step 40\nTraceback ...\nValueError: bad shard")
    assert text.splitlines() == [
        "member job-worker-1 container worker exited 3 (Error)",
        "last lines of its log:",
        "step 40",
        "Traceback ...",
        "ValueError: bad shard",
    ]
    assert describe(failed_pod([worker]), "") == "member job-worker-1 container worker exited 3 (Error)"
