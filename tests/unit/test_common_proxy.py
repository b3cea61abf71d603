"""The common role's proxy tasks with a proxy URL that carries a password, run as an operator previews them
(ansible-playbook --check --diff -vvv against localhost: nothing is written): the password is printed nowhere, and
apt's world-readable settings name the proxy without it."""

from ansible_probe import run

PASSWORD = "unit-Pr0xy-secret"
PROXY = f"http://railforge:{PASSWORD}@proxy.example.invalid:3128"
PROXY_TASKS = [{"name": "Proxy", "ansible.builtin.include_role": {"name": "common", "tasks_from": "proxy.yml"}}]


def preview(tmp_path, variables: dict) -> str:
    rc, output = run(tmp_path, PROXY_TASKS, variables, options=("--diff", "-vvv"))
    assert rc == 0, output
    return output


def task_output(output: str, task: str) -> str:
    return output.split(f"TASK [common : {task}")[1].split("TASK [")[0]


def test_a_proxy_password_is_never_printed_by_diff_or_verbose_output(tmp_path):
    output = preview(tmp_path, {"common_http_proxy": PROXY, "common_https_proxy": PROXY})
    assert PASSWORD not in output
    # The apt settings' diff is shown, without the login; the tasks that carry it hide their output.
    assert 'Acquire::http::Proxy "http://proxy.example.invalid:3128";' in output
    for task in ("Give apt the proxies' login in a root-only file", "Set the proxy for every login and service"):
        assert "output has been hidden" in task_output(output, task), output


def test_without_a_password_the_environment_diff_stays_visible(tmp_path):
    output = preview(tmp_path, {"common_http_proxy": "http://proxy.example.invalid:3128"})
    environment = task_output(output, "Set the proxy for every login and service")
    assert "+http_proxy=http://proxy.example.invalid:3128" in environment, output
    assert "skipping: [localhost]" in task_output(output, "Give apt the proxies' login"), output
