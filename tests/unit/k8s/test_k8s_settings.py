"""The adapter's settings: defaults, overrides, and one clear line for each bad setting."""

import pytest

from railforge.k8s.settings import DEFAULT_TOPOLOGY, SettingsError, load_settings, settings_from_mapping


def test_defaults():
    settings = load_settings(None)
    assert settings.scheduler_name == "railforge"
    assert settings.default_queue == "default"
    assert settings.lease_name == "railforge"
    assert settings.topology == DEFAULT_TOPOLOGY
    assert settings.policy.topology_level_names == ("spine", "leaf", "nvlink")
    assert settings.policy.backfill == "easy"


def test_a_file_sets_the_scheduler_and_its_policy(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text(
        "scheduler_name: gangs\n"
        "bind_workers: 4\n"
        "leader_election: {namespace: sched, lease_duration_seconds: 20}\n"
        "topology:\n"
        "  - {name: block, labels: [network.topology.nvidia.com/leaf]}\n"
        "  - {name: nvl, labels: [nvidia.com/gpu.clique], per_node_values: [node]}\n"
        "policy: {preset: strict_fifo, reclaim_cost_limit: null}\n"
    )
    settings = load_settings(path)
    assert (settings.scheduler_name, settings.bind_workers, settings.lease_name) == ("gangs", 4, "gangs")
    assert settings.leader_election.namespace == "sched"
    assert settings.policy.order == "fifo" and settings.policy.reclaim_cost_limit is None
    assert settings.policy.topology_level_names == ("block", "nvl")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"schedulr_name": "x"}, "schedulr_name is not a setting; expected one of: avoid_failed_nodes_seconds, bind_"),
        ({"expected_start_depth": -1}, "expected_start_depth is -1; expected a whole number from 0 to 1024"),
        ({"avoid_failed_nodes_seconds": "1h"}, "avoid_failed_nodes_seconds is '1h'; expected a number >= 0"),
        ({"scheduler_name": ""}, "scheduler_name is ''; expected a non-empty string"),
        ({"bind_workers": 0}, "bind_workers is 0; expected a whole number from 1 to 256"),
        ({"resync_seconds": 0}, "resync_seconds is 0; expected a number > 0"),
        ({"min_period_seconds": "fast"}, "min_period_seconds is 'fast'; expected a number >= 0"),
        ({"eviction_grace_seconds": -1}, "eviction_grace_seconds is -1; expected null or a whole number"),
        ({"leader_election": {"lease_duration_seconds": 5}}, "leader_election: expected retry_period_seconds <"),
        ({"leader_election": {"enabled": "yes"}}, "leader_election.enabled is 'yes'; expected true or false"),
        ({"topology": []}, "topology is []; expected a non-empty list of levels"),
        ({"topology": [{"name": "leaf"}]}, "topology[0].labels is None; expected a non-empty list"),
        ({"policy": {"backfill": "eager"}}, "policy: SchedulerConfig: backfill is 'eager'; expected one of"),
        ({"policy": {"preset": "lifo"}}, "policy: unknown preset 'lifo'"),
        ({"policy": {"topology_label_keys": []}}, "policy.topology_label_keys is not a setting"),
    ],
)
def test_each_bad_setting_is_named_in_one_line(raw, message):
    with pytest.raises(SettingsError) as refused:
        settings_from_mapping(raw)
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)


def test_unreadable_or_non_yaml_files(tmp_path):
    with pytest.raises(SettingsError, match="cannot read settings file"):
        load_settings(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1\n")
    with pytest.raises(SettingsError, match="is not YAML"):
        load_settings(bad)


def test_the_command_refuses_a_bad_setting_before_starting(tmp_path, capsys):
    from railforge.cli import main

    path = tmp_path / "settings.yaml"
    path.write_text("bind_workers: many\n")
    assert main(["scheduler", "run", f"--config={path}"]) == 2
    assert capsys.readouterr().err == (
        "railforge scheduler run: --config: bind_workers is 'many'; expected a whole number from 1 to 256\n"
    )


@pytest.mark.parametrize(
    ("selector", "labels", "selected"),
    [
        ("", {}, True),
        ("pool=a", {"pool": "a"}, True),
        ("pool=a", {"pool": "b"}, False),
        ("pool==a, gpu", {"pool": "a", "gpu": ""}, True),
        ("pool!=a", {}, True),
        ("!cordon", {"cordon": "x"}, False),
        ("gpu,!cordon", {"gpu": "1"}, True),
    ],
)
def test_node_selector(selector, labels, selected):
    assert settings_from_mapping({"node_selector": selector}).selects(labels) is selected


@pytest.mark.parametrize("selector", ["pool in (a,b)", "=a", "!pool=a", "pool=a b"])
def test_node_selectors_beyond_equality_are_refused(selector):
    with pytest.raises(SettingsError, match=r"node_selector term .*; expected key=value, key!=value, key or !key"):
        settings_from_mapping({"node_selector": selector})
