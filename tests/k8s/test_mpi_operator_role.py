"""The mpi_operator role (playbooks/scheduler.yml, tag mpi_operator) against the real API server: check mode
changes nothing, the first run applies the release's MPIJob CRD from a file:// URL and every object with server-side
apply, a second run and a check run change nothing, the ServiceAccount can do what mpi-operator 0.8.2 does and no
more (the real operator, run as that ServiceAccount, turns an MPIJob into its objects), and bad input stops the run
before anything changes."""

import subprocess
from pathlib import Path

import yaml
from conftest import GROUP_LABEL, can_i, changed, kubectl, mpi_release, run_playbook
from k8s_helpers import changed_count, mpijob
from kubernetes import client

from railforge.testbed.build import binary
from railforge.testbed.controlplane import create_namespace
from railforge.testbed.procs import Process, wait_for

NAMESPACE = "rf-mpi-operator"
ACCOUNT = f"system:serviceaccount:{NAMESPACE}:mpi-operator"


def play(plane, tmp_path: Path, *args: str, **overrides) -> subprocess.CompletedProcess:
    variables = {
        "mpi_operator_kubeconfig": str(plane.admin_kubeconfig),
        "mpi_operator_namespace": NAMESPACE,
        "mpi_operator_crd_url": f"file://{mpi_release() / 'kubeflow.org_mpijobs.yaml'}",
        **overrides,
    }
    return run_playbook("playbooks/scheduler.yml", variables, tmp_path, "--tags=mpi_operator", *args)


def can(plane, verb: str, resource: str, namespace: str = "default") -> bool:
    """kubectl auth can-i as the operator's ServiceAccount."""
    return can_i(plane, ACCOUNT, verb, resource, namespace)


def test_the_role_applies_the_operator_idempotently_with_least_privilege(control_plane, scheduler_crds, tmp_path):
    core = client.CoreV1Api(control_plane.api)
    apps = client.AppsV1Api(control_plane.api)

    cluster_wide = {"ClusterRole railforge:mpi-operator", "ClusterRoleBinding railforge:mpi-operator"}
    in_namespace = {"ServiceAccount mpi-operator", "Role mpi-operator-leader-election"}
    in_namespace |= {"RoleBinding mpi-operator-leader-election", "Deployment mpi-operator"}
    # check mode: the cluster-wide objects previewed by a dry run; nothing is created
    assert changed(play(control_plane, tmp_path, "--check")) >= cluster_wide
    assert not core.list_namespace(field_selector=f"metadata.name={NAMESPACE}").items

    first = changed(play(control_plane, tmp_path))
    assert first == {f"Namespace {NAMESPACE}", *cluster_wide, *in_namespace}, first
    crd = client.ApiextensionsV1Api(control_plane.api).read_custom_resource_definition("mpijobs.kubeflow.org")
    assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)
    assert "mpi-operator-role" in {entry.manager for entry in crd.metadata.managed_fields}
    assert changed_count(play(control_plane, tmp_path)) == 0  # server-side apply again: nothing changes
    assert changed_count(play(control_plane, tmp_path, "--check")) == 0

    deployment = apps.read_namespaced_deployment("mpi-operator", NAMESPACE)
    assert deployment.spec.replicas == 1
    pod = deployment.spec.template.spec
    assert pod.service_account_name == "mpi-operator"
    assert pod.security_context.run_as_non_root is True and pod.security_context.run_as_user == 65532
    container = pod.containers[0]
    assert container.image == "docker.io/mpioperator/mpi-operator:0.8.2"  # the pins of roles/versions
    assert container.args == [f"--lock-namespace={NAMESPACE}", "--gang-scheduling=railforge"]
    assert container.security_context.read_only_root_filesystem is True
    assert container.security_context.allow_privilege_escalation is False
    assert container.security_context.capabilities.drop == ["ALL"]
    assert container.resources.requests == {"cpu": "100m", "memory": "128Mi"}
    assert container.resources.limits == {"cpu": "1", "memory": "512Mi"}
    assert [(p.name, p.container_port) for p in container.ports] == [("healthz", 8080)]
    assert (container.liveness_probe.http_get.path, container.liveness_probe.http_get.port) == ("/healthz", "healthz")

    # what the operator does ...
    for verb, resource in (
        ("watch", "mpijobs.kubeflow.org"),
        ("update", "mpijobs.kubeflow.org:status"),
        ("create", "pods"),
        ("delete", "pods"),
        ("create", "secrets"),
        ("update", "configmaps"),
        ("create", "services"),
        ("create", "jobs.batch"),
        ("update", "jobs.batch:status"),
        ("watch", "priorityclasses.scheduling.k8s.io"),
        ("create", "podgroups.scheduling.x-k8s.io"),
        ("delete", "podgroups.scheduling.x-k8s.io"),
        ("patch", "events"),
    ):
        assert can(control_plane, verb, resource), (verb, resource)
    assert can(control_plane, "create", "leases.coordination.k8s.io", NAMESPACE)
    assert can(control_plane, "update", "leases.coordination.k8s.io/mpi-operator", NAMESPACE)
    # ... and nothing the release's ClusterRole grants beyond it
    for verb, resource, namespace in (
        ("get", "secrets", "default"),
        ("delete", "secrets", "kube-system"),
        ("create", "pods:exec", "default"),
        ("patch", "pods", "default"),
        ("create", "endpoints", "default"),
        ("create", "customresourcedefinitions.apiextensions.k8s.io", "default"),
        ("delete", "mpijobs.kubeflow.org", "default"),
        ("create", "podgroups.scheduling.volcano.sh", "default"),
        ("patch", "nodes", "default"),
        ("create", "leases.coordination.k8s.io", "default"),
        ("update", "leases.coordination.k8s.io/other", NAMESPACE),
    ):
        assert not can(control_plane, verb, resource, namespace), (verb, resource, namespace)


def test_the_real_operator_runs_an_mpijob_as_the_roles_service_account(control_plane, scheduler_crds, tmp_path):
    """The operator, out of cluster, with the ServiceAccount's token: it leads on its Lease and makes every object
    of an MPIJob, so no permission it uses was trimmed."""
    assert changed_count(play(control_plane, tmp_path)) >= 0
    token = kubectl(control_plane, "create", "token", "mpi-operator", f"--namespace={NAMESPACE}").strip()
    config = tmp_path / "operator.conf"
    cluster = {"server": control_plane.server, "certificate-authority": str(control_plane.ca.cert_path)}
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "testbed", "cluster": cluster}],
                "users": [{"name": "operator", "user": {"token": token}}],
                "contexts": [{"name": "operator", "context": {"cluster": "testbed", "user": "operator"}}],
                "current-context": "operator",
            }
        )
    )
    config.chmod(0o600)
    jobs_namespace = "rf-mpi-operator-jobs"
    create_namespace(control_plane, jobs_namespace)
    argv = [binary("mpi-operator"), f"--kubeConfig={config}", f"--lock-namespace={NAMESPACE}"]
    operator = Process("mpi-operator-sa", [*argv, "--gang-scheduling=railforge"], tmp_path / "operator.log")
    custom = client.CustomObjectsApi(control_plane.api)
    core = client.CoreV1Api(control_plane.api)
    try:
        leases = client.CoordinationV1Api(control_plane.api)
        lease = "mpi-operator"
        wait_for("the operator to lead", lambda: leases.list_namespaced_lease(NAMESPACE).items, 60, [operator])
        assert leases.read_namespaced_lease(lease, NAMESPACE).spec.holder_identity
        custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", jobs_namespace, "mpijobs", mpijob("sa", 2))

        def gang_pods():
            return core.list_namespaced_pod(jobs_namespace, label_selector=f"{GROUP_LABEL}=sa").items

        wait_for("launcher and workers", lambda: len(gang_pods()) == 3, 60, [operator])
        group = custom.get_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", jobs_namespace, "podgroups", "sa"
        )
        assert group["spec"]["minMember"] == 3
        assert core.read_namespaced_config_map("sa-config", jobs_namespace).data["hostfile"]
        assert core.read_namespaced_secret("sa-ssh", jobs_namespace).type == "kubernetes.io/ssh-auth"
        assert core.read_namespaced_service("sa", jobs_namespace).spec.cluster_ip == "None"
        status = custom.get_namespaced_custom_object("kubeflow.org", "v2beta1", jobs_namespace, "mpijobs", "sa")
        assert any(c["type"] == "Created" for c in status["status"]["conditions"])  # mpijobs/status written
        log = (tmp_path / "operator.log").read_text()
        assert "forbidden" not in log.lower(), log
    finally:
        operator.stop()
        custom.delete_namespaced_custom_object(
            "kubeflow.org", "v2beta1", jobs_namespace, "mpijobs", "sa", propagation_policy="Foreground"
        )


def test_bad_input_stops_the_role_before_anything_changes(control_plane, tmp_path):
    namespace = "rf-mpi-operator-bad"
    result = play(control_plane, tmp_path, mpi_operator_namespace=namespace, mpi_operator_gang_scheduler="Rail Forge")
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "mpi_operator_gang_scheduler must be a scheduler name (a DNS subdomain)" in output
    assert "changed=0" in output
    assert not client.CoreV1Api(control_plane.api).list_namespace(field_selector=f"metadata.name={namespace}").items
