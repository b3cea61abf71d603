"""check_role (plugins/module_utils/railforge_inventory.py), which the railforge_role_input action runs as each
role's first task: the pre-flight's own rules applied to one role's variables, every problem in one message."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checks():
    spec = importlib.util.spec_from_file_location(
        "railforge_inventory", ROOT / "plugins/module_utils/railforge_inventory.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def problems(checks, role: str, values: dict) -> list[str]:
    return checks.check_role(role, values, checks.role_specs(ROOT / "roles" / role))


def test_every_role_with_options_has_its_specs(checks):
    for role in sorted(path.name for path in (ROOT / "roles").iterdir() if (path / "meta/argument_specs.yml").exists()):
        assert checks.role_specs(ROOT / "roles" / role), role


def test_a_sound_value_passes_and_a_bad_one_is_named_with_what_was_expected(checks):
    assert problems(checks, "nvidia_driver", {"nvidia_driver_branch": "580"}) == []
    assert problems(checks, "nvidia_driver", {"nvidia_driver_branch": "58"}) == [
        "nvidia_driver_branch must be a driver branch of three digits like \"580\", got '58' (str)"
    ]


def test_every_problem_at_once_and_the_cross_rules_between_the_role_own_variables(checks):
    found = problems(
        checks,
        "nvidia_driver",
        {"nvidia_driver_branch": "580", "nvidia_driver_version": "570.1", "nvidia_driver_reboot_timeout": 0},
    )
    assert len(found) == 2
    assert found[0].startswith("nvidia_driver_reboot_timeout must be between 1 and 86400")
    assert found[1].startswith("nvidia_driver_version must be a version of nvidia_driver_branch 580")


def test_a_cross_rule_with_a_variable_of_another_role_is_left_to_the_preflight(checks):
    # nvidia_dcgm_cuda_major against nvidia_driver_branch: nvidia_dcgm alone does not hold the branch
    assert problems(checks, "nvidia_dcgm", {"nvidia_dcgm_cuda_major": 13, "nvidia_driver_branch": "550"}) == []


def test_secrets_are_masked(checks):
    found = problems(checks, "common", {"common_https_proxy": "http://ops:S3cr3t@proxy example.com:3128"})
    assert found and "S3cr3t" not in found[0] and "http://ops:********@proxy example.com:3128" in found[0]


def test_the_message_lists_every_problem_on_its_own_line(checks):
    message = checks.role_input_message("roce_qos", ["a: x", "b: y"])
    assert message == "Invalid input for role roce_qos (nothing was changed):\n- a: x\n- b: y"


@pytest.mark.parametrize(
    ("value", "problem"),
    [("ubuntu2404", False), ("debian12", False), ("ubuntu2204", False), ("ubuntu1804", True), ("rhel9", True)],
)
def test_the_driver_repository_distribution_is_one_the_role_supports(checks, value, problem):
    assert bool(checks.FORMATS["cuda_repo_distribution"](value)) is problem


# Rules that only the roles had: now RULES/CROSS_RULES, the pre-flight's too (same accepted values as the roles').
@pytest.mark.parametrize(
    ("name", "good", "bad"),
    [
        ("dcgm_exporter_remote_hostengine", ["", "localhost:5555", "[fe80::1]:5555"], ["localhost", "host:0"]),
        ("dcgm_exporter_scrape_interval", ["30s", "1m30s", "500ms"], ["30", "30 s"]),
        ("kubernetes_join_token_ttl", ["15m", "1h30m"], ["forever", "15"]),
        ("kubernetes_kubeconfig", ["/etc/kubernetes/admin.conf"], [""]),
        ("kubernetes_flannel_iface", ["", "eth0", "10.0.0.1"], ["eth 0", "a" * 16]),
        ("mpi_operator_gang_scheduler", ["", "railforge", "scheduler-plugins-scheduler"], ["rail forge", "a" * 254]),
        ("mpi_operator_crd_url", ["https://x.example/crd.yaml", "file:///srv/crd.yaml"], ["ftp://x/c", "file://c/c"]),
        ("mpi_operator_crd_checksum", ["sha256:" + "0" * 64], ["md5:0123", "sha256:" + "E" * 64]),
        ("railforge_scheduler_podgroup_crd_url", ["http://x.example/p.yaml"], ["podgroups.yaml"]),
        ("railforge_scheduler_podgroup_crd_checksum", ["sha256:" + "a" * 64], [""]),
        ("rail_networks_resource_prefix", ["rdma", "rdma.shared_1"], ["RDMA", "-rdma"]),
        ("nvidia_dcgm_exporter_version", ["4.8.1-1", "1:4.8.1-1"], ["4.8-1", "latest"]),
        ("nvidia_container_toolkit_version", ["1.17.8-1", "1.18.0~rc.1-1"], ["1.17-1", "latest"]),
        ("versions_railforge_scheduler_tag", ["0.4.0"], ["v0.4.0", "0.4"]),
    ],
)
def test_the_rules_moved_from_the_roles(checks, name, good, bad):
    spec = {"type": "str"}
    for value in good:
        assert checks.check_value(name, value, spec) == [], value
    for value in bad:
        assert checks.check_value(name, value, spec), value


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}, True),
        ({"requests": {"cpu": "1", "memory": "1Gi"}}, False),
        ({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1"}}, False),
        ({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": "2"}, False),
    ],
)
def test_container_resources_are_requests_and_limits_of_cpu_and_memory(checks, value, ok):
    for name in ("mpi_operator_resources", "railforge_scheduler_resources"):
        assert (checks.check_value(name, value, {"type": "dict"}) == []) is ok


def test_at_least_one_item(checks):
    assert checks.check_value("dcgm_exporter_node_selector", {}, {"type": "dict"}) == [
        "dcgm_exporter_node_selector must have at least 1 item(s), got {} (dict)"
    ]
    assert checks.check_value("dcgm_exporter_node_selector", {"a": "b"}, {"type": "dict"}) == []
    assert checks.check_value("dcgm_exporter_metrics", [], {"type": "list"})
    assert checks.check_value("nvidia_dcgm_exporter_collectors", [], {"type": "list"})


def test_iommu_passthrough_needs_kernel_arguments(checks):
    found = problems(checks, "gpudirect", {"gpudirect_iommu_passthrough": True, "gpudirect_kernel_args": []})
    assert found == [
        "gpudirect_kernel_args must list the kernel arguments while gpudirect_iommu_passthrough is true, got []"
    ]
    assert problems(checks, "gpudirect", {"gpudirect_iommu_passthrough": False, "gpudirect_kernel_args": []}) == []


def test_a_variable_naming_a_group_names_one_of_the_inventory(checks):
    specs = checks.role_specs(ROOT / "roles/common")
    groups = {"all": ["a"], "gpu_nodes": ["a"]}
    assert checks.check_role("common", {"common_etc_hosts_group": "gpu_nodes"}, specs, groups) == []
    assert checks.check_role("common", {"common_etc_hosts_group": "gpu_nodez"}, specs, groups) == [
        "common_etc_hosts_group must be an inventory group, got 'gpu_nodez' (no such group)"
    ]


def test_a_group_named_by_default_may_be_absent(checks):
    """nvidia_driver_gpu_group's default, gpu_nodes, need not exist: the role then finds no GPU host to act on."""
    specs = checks.role_specs(ROOT / "roles/nvidia_driver")
    assert checks.check_role("nvidia_driver", {"nvidia_driver_gpu_group": "gpu_nodes"}, specs, {"all": []}) == []
