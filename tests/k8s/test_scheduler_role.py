"""The railforge_scheduler role (playbooks/scheduler.yml) against the real API server: check mode changes nothing,
the first run applies every object with server-side apply, a second run and a check run change nothing, the
ServiceAccount can do what the scheduler needs and no more, the role itself serves the PodGroup CRD of the pinned
scheduler-plugins release (the test bed's copy, by file:// URL, with the pinned checksum), and bad settings or a CRD
file that is not the pinned one stop the run before anything changes."""

import json
import subprocess
from pathlib import Path

import yaml
from conftest import can_i, changed, mpi_release
from k8s_helpers import changed_count, scheduler_play
from kubernetes import client

from railforge.k8s.settings import settings_from_mapping

NAMESPACE = "rf-role-test"
SETTINGS = {"scheduler_name": "role-test", "node_selector": "railforge.test/pool=role-test", "bind_workers": 8}
PODGROUP_CRD = "podgroups.scheduling.x-k8s.io"


def play(plane, tmp_path: Path, *args: str, **overrides) -> subprocess.CompletedProcess:
    variables = {"railforge_scheduler_namespace": NAMESPACE, "railforge_scheduler_settings": SETTINGS, **overrides}
    return scheduler_play(plane, tmp_path, *args, **variables)


def can(plane, verb: str, resource: str, namespace: str = "default") -> bool:
    """kubectl auth can-i as the scheduler's ServiceAccount."""
    return can_i(plane, f"system:serviceaccount:{NAMESPACE}:railforge-scheduler", verb, resource, namespace)


def podgroup_crd_served(plane) -> bool:
    found = client.ApiextensionsV1Api(plane.api).list_custom_resource_definition(
        field_selector=f"metadata.name={PODGROUP_CRD}"
    )
    return any(c.type == "Established" and c.status == "True" for crd in found.items for c in crd.status.conditions)


# No scheduler_crds fixture: the role applies both CRDs itself (another module may have applied them before).
def test_the_role_applies_the_scheduler_idempotently_with_least_privilege(control_plane, tmp_path):
    core = client.CoreV1Api(control_plane.api)
    apps = client.AppsV1Api(control_plane.api)
    extensions = client.ApiextensionsV1Api(control_plane.api)

    name = "railforge-scheduler"
    cluster_wide = {f"ClusterRole {name}", f"ClusterRoleBinding {name}"}
    in_namespace = {f"ServiceAccount {name}", f"Role {name}-leader-election", f"RoleBinding {name}-leader-election"}
    in_namespace |= {f"ConfigMap {name}-settings", f"ConfigMap {name}-grafana-dashboard"}
    in_namespace |= {f"Deployment {name}", f"Service {name}"}
    # check mode: the cluster-wide objects previewed by a dry run; nothing is created
    served_before = podgroup_crd_served(control_plane)
    assert changed(play(control_plane, tmp_path, "--check")) >= cluster_wide
    assert not core.list_namespace(field_selector=f"metadata.name={NAMESPACE}").items
    assert podgroup_crd_served(control_plane) == served_before

    first = changed(play(control_plane, tmp_path))
    assert first >= {f"Namespace {NAMESPACE}", *cluster_wide, *in_namespace}, first
    # the PodGroup CRD, served and applied under the role's field manager
    assert podgroup_crd_served(control_plane)
    podgroup_crd = extensions.read_custom_resource_definition(PODGROUP_CRD)
    assert "railforge-scheduler-role" in {entry.manager for entry in podgroup_crd.metadata.managed_fields}
    assert changed_count(play(control_plane, tmp_path)) == 0  # server-side apply again: nothing changes
    assert changed_count(play(control_plane, tmp_path, "--check")) == 0

    deployment = apps.read_namespaced_deployment("railforge-scheduler", NAMESPACE)
    assert deployment.spec.replicas == 2
    pod = deployment.spec.template.spec
    assert pod.service_account_name == "railforge-scheduler"
    assert pod.security_context.run_as_non_root is True and pod.security_context.run_as_user == 65532
    container = pod.containers[0]
    assert container.image == "localhost/railforge-scheduler:0.1.0"  # the pins of roles/versions
    assert container.security_context.read_only_root_filesystem is True
    assert container.security_context.allow_privilege_escalation is False
    assert container.security_context.capabilities.drop == ["ALL"]
    assert container.resources.requests == {"cpu": "500m", "memory": "512Mi"}
    assert container.resources.limits == {"cpu": "2", "memory": "2Gi"}
    assert "--http-address=0.0.0.0:8480" in container.args
    managers = {entry.manager for entry in deployment.metadata.managed_fields}
    assert "railforge-scheduler-role" in managers  # applied server-side under the role's field manager
    service = core.read_namespaced_service("railforge-scheduler", NAMESPACE)
    assert [(p.port, p.target_port) for p in service.spec.ports] == [(8480, "http")]

    settings = core.read_namespaced_config_map("railforge-scheduler-settings", NAMESPACE).data["settings.yaml"]
    applied = settings_from_mapping(yaml.safe_load(settings))  # the scheduler accepts what the role wrote
    assert applied.scheduler_name == "role-test" and applied.bind_workers == 8
    assert applied.leader_election.enabled and applied.leader_election.namespace == NAMESPACE
    dashboard = core.read_namespaced_config_map("railforge-scheduler-grafana-dashboard", NAMESPACE)
    assert dashboard.metadata.labels["grafana_dashboard"] == "1"
    panels = json.loads(dashboard.data["railforge-scheduler.json"])["panels"]
    assert any("railforge_gang_scheduling_latency_seconds_bucket" in t["expr"] for p in panels for t in p["targets"])

    # what the scheduler needs ...
    for verb, resource in (
        ("watch", "pods"),
        ("watch", "jobs.batch"),
        ("create", "pods:binding"),
        ("create", "pods:eviction"),
        ("list", "poddisruptionbudgets.policy"),
        ("patch", "pods:status"),
        ("delete", "pods"),
        ("get", "pods:log"),
        ("create", "events"),
        ("list", "nodes"),
        ("patch", "podgroups.scheduling.x-k8s.io"),
        ("watch", "podgroups.scheduling.k8s.io"),
        ("patch", "podgroups.scheduling.k8s.io:status"),
        ("patch", "queues.railforge.io:status"),
        ("watch", "resourceslices.resource.k8s.io"),
        ("patch", "resourceclaims.resource.k8s.io"),
        ("update", "resourceclaims.resource.k8s.io:status"),
    ):
        assert can(control_plane, verb, resource), (verb, resource)
    assert can(control_plane, "create", "leases.coordination.k8s.io", NAMESPACE)
    assert can(control_plane, "update", "leases.coordination.k8s.io/role-test", NAMESPACE)
    # ... and nothing more
    for verb, resource, namespace in (
        ("create", "pods", "default"),
        ("delete", "jobs.batch", "default"),
        ("get", "secrets", "default"),
        ("patch", "nodes", "default"),
        ("create", "pods:exec", "default"),
        ("update", "queues.railforge.io", "default"),
        ("delete", "resourceclaims.resource.k8s.io", "default"),
        ("create", "resourceslices.resource.k8s.io", "default"),
        ("create", "leases.coordination.k8s.io", "default"),
        ("update", "leases.coordination.k8s.io/other", NAMESPACE),
    ):
        assert not can(control_plane, verb, resource, namespace), (verb, resource, namespace)


def test_bad_settings_stop_the_role_before_anything_changes(control_plane, scheduler_crds, tmp_path):
    bad = {"railforge_scheduler_settings": {"bind_workers": 0}, "railforge_scheduler_namespace": "rf-role-bad"}
    result = play(control_plane, tmp_path, **bad)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    # the pre-flight's rule, through the scheduler's own validation
    assert (
        "railforge_scheduler_settings must be settings the scheduler accepts (docs/scheduler.md): bind_workers is 0; "
        "expected a whole number from 1 to 256" in output
    )
    assert "changed=0" in output
    assert not client.CoreV1Api(control_plane.api).list_namespace(field_selector="metadata.name=rf-role-bad").items


def test_a_podgroup_crd_file_that_is_not_the_pinned_one_stops_the_role_before_anything_changes(control_plane, tmp_path):
    tampered = tmp_path / "podgroups.yaml"
    tampered.write_text((mpi_release() / "scheduling.x-k8s.io_podgroups.yaml").read_text() + "# edited\n")
    result = play(
        control_plane,
        tmp_path,
        railforge_scheduler_namespace="rf-role-tampered",
        railforge_scheduler_podgroup_crd_url=f"file://{tampered}",
    )
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Download the PodGroup CRD and check its checksum" in output
    assert "did not match" in output
    assert "changed=0" in output
    assert not client.CoreV1Api(control_plane.api).list_namespace(field_selector="metadata.name=rf-role-tampered").items
