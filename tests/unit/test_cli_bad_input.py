"""Bad input to every ``railforge`` subcommand ends in one line on stderr that names the argument, a non-zero exit
status and no traceback (issue 41); a bug in a command still raises."""

from __future__ import annotations

import signal
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

from railforge.cli import main

# loopback port 1: nothing listens, the connection is refused at once
UNREACHABLE = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


@pytest.fixture
def paths(tmp_path: Path) -> dict[str, Path]:
    made = {name: tmp_path / name for name in ("missing", "empty", "binary", "unparsable", "file", "dir", "notes")}
    made["empty"].write_text("  \n")
    made["binary"].write_bytes(bytes(range(256)))
    made["unparsable"].write_text("plan: [unclosed\n")
    made["file"].write_text("a file\n")
    made["dir"].mkdir()
    made["notes"].mkdir()
    (made["notes"] / "notes.md").write_text("not a benchmark output\n")
    made["list"] = tmp_path / "list.yml"
    made["list"].write_text("- a\n- b\n")
    made["mistyped"] = tmp_path / "mistyped.yml"  # a mapping, its fields not a kubeconfig's types
    made["mistyped"].write_text("clusters: 3\ncontexts: {}\n")
    made["unreachable"] = tmp_path / "kubeconfig"
    made["unreachable"].write_text(UNREACHABLE)
    made["out"] = tmp_path / "out"
    made["tools"] = tmp_path / "tools.json"  # a plan whose perftest tools are no list
    made["tools"].write_text('{"mode": "cpu", "nodes": ["n1"], "perftest_tools": 3}\n')
    made["jobs"] = tmp_path / "jobs"  # collect's results, its jobs.json not what collect writes
    made["jobs"].mkdir()
    (made["jobs"] / "jobs.json").write_text('{"mpijobs": [3]}\n')
    made["example"] = tmp_path / "example"  # an inventory of host h without group_vars
    made["example"].mkdir()
    (made["example"] / "hosts.yml").write_text("all: {hosts: {h: {}}}\n")
    made["groups"] = tmp_path / "groups"  # an inventory whose group is no mapping
    made["groups"].mkdir()
    (made["groups"] / "hosts.yml").write_text("all: 3\n")
    made["overlay"] = tmp_path / "overlay.yml"
    made["overlay"].write_text("hosts: {h: {}}\n")
    made["host_list"] = tmp_path / "host_list.yml"
    made["host_list"].write_text("hosts: {h: [1]}\n")
    return made


@pytest.fixture(autouse=True)
def keep_signal_handlers():
    """Commands that run until a signal install handlers for it: put pytest's back."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


SIM = "simulate --trace philly --max-jobs 5"
JUDGE = "bench judge --class h200-sxm-cx7-ndr --results"
COLLECT = "bench collect --namespace ns --job run --results {out} --kubeconfig"
REPORT = "bench report --class h200-sxm-cx7-ndr --reports {out} --results {dir} --cluster"
PLUGINS = "lab device-plugins --state-dir {out} --plugin-dir"

# (command line, what the one line must name); {name} is a path of the `paths` fixture
CASES = [
    (f"{SIM} --nodes -3", "--nodes"),
    (f"{SIM} --nodes 0", "--nodes"),
    (f"{SIM} --gpus-per-node 0", "--gpus-per-node"),
    (f"{SIM} --nodes-per-leaf -1", "--nodes-per-leaf"),
    (f"{SIM} --nvlink-domain 0", "--nvlink-domain"),
    (f"{SIM} --load -1", "--load"),
    (f"{SIM} --load nan", "--load"),
    (f"{SIM} --failures -2", "--failures"),
    (f"{SIM} --period -5", "--period"),
    (f"{SIM} --resync 0", "--resync"),
    (f"{SIM} --jobs 0", "--jobs"),
    (f"{SIM} --max-jobs -1", "--max-jobs"),
    (f"{SIM} --policies ,", "--policies"),
    (f"{SIM} --estimates ,", "--estimates"),
    (f"{SIM} --out {{file}}", "--out"),
    (f"{SIM} --out {{file}}/report", "--out"),
    (f"{SIM} --cache {{file}}", "--cache"),
    ("simulate --nodes 4", "--trace"),
    ("simulate-report --traces philly --jobs 0", "--jobs"),
    ("simulate-report --traces philly --doc {dir}", "--doc"),
    ("simulate-report --traces philly --plots-dir {file}", "--plots-dir"),
    ("simulate-report --traces ,", "--traces"),  # not every trace
    ("simulate-report --traces philly --notes {dir}", "--notes"),
    ("simulate-report --traces philly --notes {binary}", "--notes"),
    ("bench render --plan {missing}", "--plan"),
    ("bench render --plan {empty}", "--plan"),
    ("bench render --plan {unparsable}", "--plan"),
    ("bench render --plan {binary}", "--plan"),
    ("bench render --plan {dir}", "--plan"),
    ("bench render --plan {tools}", "perftest_tools"),
    (f"{JUDGE} {{missing}}", "--results"),
    (f"{JUDGE} {{file}}", "--results"),
    (f"{JUDGE} {{dir}}", "--results"),  # nothing to judge is not a pass
    (f"{JUDGE} {{notes}}", "--results"),
    (f"{JUDGE} {{dir}} --floors {{binary}}", "--floors"),
    (f"{JUDGE} {{dir}} --json {{dir}}", "--json"),
    (f"{COLLECT} {{missing}}", "--kubeconfig"),
    (f"{COLLECT} {{empty}}", "--kubeconfig"),
    (f"{COLLECT} {{dir}}", "--kubeconfig"),
    (f"{COLLECT} {{binary}}", "--kubeconfig"),
    (f"{COLLECT} {{unparsable}}", "--kubeconfig"),
    (f"{COLLECT} {{list}}", "--kubeconfig"),
    (f"{COLLECT} {{unreachable}}", "127.0.0.1:1"),
    (f"{COLLECT} {{unreachable}} --timeout -1", "--timeout"),
    ("bench collect --namespace ../x --job run --results {out} --kubeconfig {unreachable}", "--namespace"),
    (f"{REPORT} ../../x", "--cluster"),
    (f"{REPORT} a/b", "--cluster"),
    (f"{REPORT} ..", "--cluster"),
    ("bench report --class h200-sxm-cx7-ndr --reports {file} --results {dir} --cluster c", "--reports"),
    ("bench report --class h200-sxm-cx7-ndr --reports {out} --results {missing} --cluster c", "--results"),
    ("bench report --class h200-sxm-cx7-ndr --reports {out} --results {jobs} --cluster c", "--results"),
    ("bench report --class h200-sxm-cx7-ndr --reports {out} --results {dir} --cluster c --floors-json {{", "JSON"),
    ("scheduler run --kubeconfig {missing}", "--kubeconfig"),
    ("scheduler run --kubeconfig {binary}", "--kubeconfig"),
    ("scheduler run --kubeconfig {dir}", "--kubeconfig"),
    ("scheduler run --kubeconfig {file}", "--kubeconfig"),
    ("scheduler run --kubeconfig {list}", "--kubeconfig"),
    ("scheduler run --kubeconfig {mistyped}", "--kubeconfig"),
    ("scheduler run --kubeconfig {unparsable}", "--kubeconfig"),
    ("scheduler run --kubeconfig {unreachable}", "127.0.0.1:1"),
    ("scheduler run --config {binary}", "settings file"),
    ("scheduler run --config {unparsable}", "settings file"),
    ("queue", "--kubeconfig --url"),
    ("queue --kubeconfig {dir}", "--kubeconfig"),
    ("queue --kubeconfig {unreachable}", "127.0.0.1:1"),
    ("queue --url 127.0.0.1:8480", "--url"),
    ("queue --url http://127.0.0.1:1", "--url"),
    ("queue --url http://127.0.0.1:port", "--url"),
    ("queue --url http://[::1", "--url"),
    ("lab job --kubeconfig {missing}", "--kubeconfig"),
    ("lab job --kubeconfig {empty}", "--kubeconfig"),
    ("lab job --kubeconfig {dir}", "--kubeconfig"),
    ("lab job --kubeconfig {unreachable}", "127.0.0.1:1"),
    ("lab job --kubeconfig {unreachable} --workers 0", "--workers"),
    ("lab job --kubeconfig {unreachable} --worker-cpu lots", "--worker-cpu"),
    ("lab job --kubeconfig {unreachable} --name Bad_Name", "--name"),
    ("lab job --kubeconfig {unreachable} --rail ../r", "--rail"),
    ("lab hardware {file}", "root"),
    ("lab hardware {notes}", "root"),  # a directory it did not build is not removed
    ("lab hardware {file}/root", "root"),
    ("lab hardware {dir} --ibdev2netdev {binary}", "--ibdev2netdev"),
    ("lab inventory --out {out} --example {example} --overlay {overlay}", "group_vars"),
    ("lab inventory --out {out} --example {groups} --overlay {overlay}", "group all"),
    ("lab inventory --out {out} --example {example} --overlay {host_list}", "hosts: h"),
    (f"{PLUGINS} {{missing}}", "--plugin-dir"),
    (f"{PLUGINS} {{file}}", "--plugin-dir"),
    (f"{PLUGINS} {{dir}} --gpus -1", "--gpus"),
    (f"{PLUGINS} {{dir}} --rdma-slots 0", "--rdma-slots"),
    (f"{PLUGINS} {{dir}} --rail ../../etc", "--rail"),
    ("testbed up --gpus -1", "--gpus"),
    ("testbed up --rails -2", "--rails"),
    ("testbed remove-stale-bridges 10.89.50.0/33", "subnet"),
    ("testbed remove-stale-bridges 10.89.50.1/24", "subnet"),  # an address, not the subnet
    ("testbed up", "make setup"),  # before a build: the cache is empty
]


def run(argv: list[str], capsys) -> tuple[int, list[str]]:
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse's refusals
        code = stop.code if isinstance(stop.code, int) else 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err.splitlines()


@pytest.mark.parametrize(("command", "named"), CASES, ids=[command for command, _ in CASES])
def test_bad_input_is_one_line(command, named, paths, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RAILFORGE_CACHE", str(tmp_path / "cache"))
    argv = [word.format(**paths) for word in command.split()]
    code, lines = run(argv, capsys)
    assert code != 0
    assert len(lines) == 1, lines
    subcommand = " ".join(word for word in argv[:2] if not word.startswith("-"))
    assert lines[0].startswith(f"railforge {subcommand}: "), lines[0]
    assert named in lines[0]


def test_remove_stale_bridges_without_its_tools_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # neither podman nor ip
    code, lines = run(["testbed", "remove-stale-bridges", "10.89.99.0/24"], capsys)
    assert code == 2
    assert lines == [
        "railforge testbed remove-stale-bridges: cannot run podman: No such file or directory (podman and iproute2 "
        "are needed)"
    ]


def test_usage_errors_exit_2(paths, capsys):
    assert run(["bench", "render", "--plan", str(paths["missing"])], capsys)[0] == 2
    assert run(["bench", "judge", "--class", "h200-sxm-cx7-ndr", "--results", str(paths["dir"])], capsys)[0] == 2


def test_no_verdicts_writes_no_report(paths, capsys):
    """An empty results folder fails before any table or JSON is written."""
    out = paths["out"] / "judge.json"
    argv = ["bench", "judge", "--class", "h200-sxm-cx7-ndr", "--results", str(paths["notes"]), "--json", str(out)]
    assert run(argv, capsys)[0] == 2
    assert not out.exists()


def test_a_bug_keeps_its_traceback(paths, monkeypatch):
    """Only bad input is shortened to one line: anything else a command raises reaches the caller."""
    from railforge.bench import commands

    def broken(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(commands, "cmd_render", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["bench", "render", "--plan", str(paths["file"])])


def test_taken_http_address_is_one_line(paths, monkeypatch, capsys):
    """The dashboard's address taken: one line, and the adapter started before it is stopped again."""
    from railforge.k8s import adapter, commands

    stopped = []

    class Adapter:
        def __init__(self, *args, **kwargs) -> None:
            pass

        def start(self):
            return self

        def stop(self) -> None:
            stopped.append(self)

    monkeypatch.setattr(adapter, "Adapter", Adapter)
    monkeypatch.setattr(commands, "kube_client", lambda kubeconfig: SimpleNamespace(close=lambda: None))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        argv = ["scheduler", "run", "--kubeconfig", str(paths["file"]), "--http-address", address]
        code, lines = run(argv, capsys)
    assert code == 2 and stopped
    assert len(lines) == 1 and lines[0].startswith(f"railforge scheduler run: --http-address {address}: cannot serve")
