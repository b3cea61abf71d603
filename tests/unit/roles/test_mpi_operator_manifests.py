"""The mpi_operator role's objects as its template renders them: the gang scheduler decides the flag and which
PodGroups the operator may manage, and the ClusterRole never grants a wildcard or reads a Secret by name."""

from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = Path(__file__).resolve().parents[3] / "roles/mpi_operator"


def render(**overrides) -> dict:
    """Kind -> object of the template, with the role's defaults for the values the tests do not set."""
    variables = {
        **yaml.safe_load((ROLE / "vars/main.yml").read_text()),
        **yaml.safe_load((ROLE / "defaults/main.yml").read_text()),
        "mpi_operator_image": "mirror.example/mpioperator/mpi-operator:0.8.2",
        **overrides,
    }
    text = Templar(loader=DataLoader(), variables=variables).template(
        trust_as_template((ROLE / "templates/mpi-operator.yaml.j2").read_text())
    )
    return {obj["kind"]: obj for obj in yaml.safe_load_all(text)}


def podgroup_groups(objects: dict) -> list[str]:
    rules = objects["ClusterRole"]["rules"]
    return [group for rule in rules if "podgroups" in rule["resources"] for group in rule["apiGroups"]]


def args(objects: dict) -> list[str]:
    return objects["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]


@pytest.mark.parametrize(
    ("scheduler", "flag", "groups"),
    [
        ("railforge", ["--gang-scheduling=railforge"], ["scheduling.x-k8s.io"]),
        ("volcano", ["--gang-scheduling=volcano"], ["scheduling.volcano.sh"]),
        ("", [], []),
    ],
)
def test_the_gang_scheduler_sets_the_flag_and_the_podgroups_the_operator_manages(scheduler, flag, groups):
    objects = render(mpi_operator_gang_scheduler=scheduler, mpi_operator_namespace="mpi")
    assert args(objects) == ["--lock-namespace=mpi", *flag]
    assert podgroup_groups(objects) == groups


def test_the_cluster_role_names_every_verb_and_reads_no_secret_by_name():
    rules = render()["ClusterRole"]["rules"]
    assert all("*" not in rule["verbs"] and "*" not in rule["resources"] for rule in rules)
    secret_verbs = {verb for rule in rules if "secrets" in rule["resources"] for verb in rule["verbs"]}
    assert secret_verbs == {"list", "watch", "create", "update"}
    assert not [rule for rule in rules if "pods/exec" in rule["resources"] or "endpoints" in rule["resources"]]


def test_the_lease_role_is_in_the_operators_namespace_and_names_its_lease():
    objects = render(mpi_operator_namespace="mpi")
    role = objects["Role"]
    assert role["metadata"]["namespace"] == "mpi"
    by_name = [rule for rule in role["rules"] if rule.get("resourceNames")]
    assert by_name == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["mpi-operator"],
            "verbs": ["get", "update"],
        }
    ]
    assert objects["ClusterRoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "mpi-operator", "namespace": "mpi"}
    ]
