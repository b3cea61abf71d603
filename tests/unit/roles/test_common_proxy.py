"""The common role's proxy tasks with a proxy URL that carries a password, run as an operator previews them
(ansible-playbook --check --diff -vvv against localhost: nothing is written): the password is printed nowhere, and
apt's world-readable settings name the proxy without it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
PASSWORD = "unit-Pr0xy-secret"
PROXY = f"http://railforge:{PASSWORD}@proxy.example.invalid:3128"


def preview(tmp_path: Path, variables: dict) -> str:
    play = {
        "name": "Preview the proxy tasks",
        "hosts": "all",
        "gather_facts": False,
        "tasks": [{"name": "Proxy", "ansible.builtin.include_role": {"name": "common", "tasks_from": "proxy.yml"}}],
    }
    (tmp_path / "play.yml").write_text(yaml.safe_dump([play]))
    (tmp_path / "vars.json").write_text(json.dumps(variables))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    result = subprocess.run(
        [
            "ansible-playbook",
            "--check",
            "--diff",
            "-vvv",
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "-e",
            f"@{tmp_path / 'vars.json'}",
            str(tmp_path / "play.yml"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return output


def test_a_proxy_password_is_never_printed_by_diff_or_verbose_output(tmp_path):
    output = preview(tmp_path, {"common_http_proxy": PROXY, "common_https_proxy": PROXY})
    assert PASSWORD not in output
    # The apt settings' diff is shown, without the login; the tasks that carry it hide their output.
    assert 'Acquire::http::Proxy "http://proxy.example.invalid:3128";' in output
    for task in ("Give apt the proxies' login in a root-only file", "Set the proxy for every login and service"):
        section = output.split(f"TASK [common : {task}")[1].split("TASK [")[0]
        assert "output has been hidden" in section, section


def test_without_a_password_the_environment_diff_stays_visible(tmp_path):
    output = preview(tmp_path, {"common_http_proxy": "http://proxy.example.invalid:3128"})
    section = output.split("TASK [common : Set the proxy for every login and service")[1].split("TASK [")[0]
    assert "+http_proxy=http://proxy.example.invalid:3128" in section, section
    assert "skipping: [localhost]" in output.split("TASK [common : Give apt the proxies' login")[1].split("TASK [")[0]
