"""Callback plugin: the summary that ends playbooks/site.yml (and nodes.yml) -- per node what changed, what rebooted,
what needs attention -- printed and written as JSON under reports/."""

import json
import time
from collections import defaultdict
from pathlib import Path

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: railforge_summary
type: aggregate
short_description: Per-node summary at the end of playbooks/site.yml and playbooks/nodes.yml
description:
  - Counts each host's changed tasks by role and notes its failed tasks and whether it was unreachable; keeps the
    facts node_reboot sets (reasons, rebooted, failure), the hardware facts' warnings and the notes roles leave in
    the fact versions_run_notes (e.g. a signing key checked by its long id only).
  - Each note is printed once, naming the nodes it concerns; the JSON keeps it in each of those nodes' notes.
  - At the end of a run of site.yml or nodes.yml that reached the nodes, prints one block per node and writes the
    same as JSON to site-<UTC time>.json in reports_dir, then the wall time of each stage (the playbook file its
    plays come from, in the order run). Other playbooks are left alone.
requirements:
  - enabled in ansible.cfg (callbacks_enabled)
options:
  reports_dir:
    description: Folder of the JSON reports; empty for reports/ beside the playbooks folder.
    type: str
    default: ""
    env:
      - name: RAILFORGE_REPORTS_DIR
    ini:
      - section: callback_railforge_summary
        key: reports_dir
"""

SUMMARISED_PLAYBOOKS = ("site.yml", "nodes.yml")
# Facts node_reboot sets on every node it ran for.
REBOOT_FACTS = ("node_reboot_pending", "node_reboot_rebooted", "node_reboot_failure")
# The fact in which roles leave notes for the operator (a list of sentences, the same on every node they concern).
NOTES_FACT = "versions_run_notes"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "railforge_summary"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._playbook: Path | None = None
        self._nodes: dict[str, dict] = defaultdict(
            lambda: {
                "changed": defaultdict(int),
                "failed": [],
                "unreachable": False,
                "facts": {},
                "warnings": [],
                "notes": [],
            }
        )
        # seconds per stage (a play's playbook file, without .yml), and the stage now running with its start
        self._stage_seconds: dict[str, float] = defaultdict(float)
        self._stage: tuple[str, float] | None = None

    def v2_playbook_on_start(self, playbook):
        path = Path(playbook._file_name)
        self._playbook = path if path.name in SUMMARISED_PLAYBOOKS else None

    def v2_playbook_on_play_start(self, play):
        now = time.monotonic()
        self._end_stage(now)
        path = play.get_path().rsplit(":", 1)[0]  # "file:line", empty where Ansible does not know it
        self._stage = (Path(path).stem if path else play.get_name(), now)

    def _end_stage(self, now: float) -> None:
        if self._stage is not None:
            name, started = self._stage
            self._stage_seconds[name] += now - started
            self._stage = None

    def v2_runner_on_ok(self, result):
        node = self._nodes[result._host.get_name()]
        if result.is_changed():
            role = result._task._role
            node["changed"][role.get_name() if role else "playbook"] += 1
        facts = result._result.get("ansible_facts") or {}
        node["facts"].update({name: facts[name] for name in REBOOT_FACTS if name in facts})
        node["warnings"] += (facts.get("railforge_hw") or {}).get("warnings", [])
        node["notes"] += [note for note in facts.get(NOTES_FACT, []) if note not in node["notes"]]

    def v2_runner_on_failed(self, result, ignore_errors=False):
        # The inventory check's refusal is its own report: the nodes were not touched.
        if not ignore_errors and not result._task.action.endswith("railforge_inventory_check"):
            self._nodes[result._host.get_name()]["failed"].append(result._task.get_name())

    def v2_runner_on_unreachable(self, result):
        self._nodes[result._host.get_name()]["unreachable"] = True

    def v2_playbook_on_stats(self, stats):
        self._end_stage(time.monotonic())
        started = any(
            node["facts"] or node["changed"] or node["failed"] or node["unreachable"] for node in self._nodes.values()
        )
        if self._playbook is None or not started:
            return  # not a summarised playbook, or stopped before any node was touched (the inventory check)
        report = {host: summary(node) for host, node in sorted(self._nodes.items()) if host != "localhost"}
        folder = Path(self.get_option("reports_dir") or self._playbook.resolve().parent.parent / "reports")
        path = folder / time.strftime("site-%Y%m%dT%H%M%SZ.json", time.gmtime())
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
        self._display.banner("RAILFORGE SUMMARY")
        for host, entry in report.items():
            changed = ", ".join(f"{role} {count}" for role, count in entry["changed"].items()) or "nothing"
            rebooted = "yes (" + "; ".join(entry["reboot_reasons"]) + ")" if entry["rebooted"] else "no"
            self._display.display(f"{host}: changed: {changed}; rebooted: {rebooted}")
            for item in entry["attention"]:
                self._display.display(f"  needs attention: {item}", color="yellow")
        for note, hosts in notes_by_text(report).items():
            self._display.display(f"note ({', '.join(hosts)}): {note}")
        self._display.display(f"JSON report: {path}")
        stages = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in self._stage_seconds.items())
        self._display.display(f"stage times: {stages}")


def summary(node: dict) -> dict:
    facts = node["facts"]
    reasons = [reason["reason"] for reason in facts.get("node_reboot_pending", [])]
    rebooted = bool(facts.get("node_reboot_rebooted"))
    attention = [f"failed: {task}" for task in node["failed"]]
    if node["unreachable"]:
        attention.append("unreachable")
    if facts.get("node_reboot_failure"):
        attention.append(f"reboot failed, Node left cordoned: {facts['node_reboot_failure']}")
    elif reasons and not rebooted:
        attention.append(f"reboot pending: {'; '.join(reasons)}")
    if "node_reboot_pending" not in facts and not attention:
        attention.append("the node stage did not reach it (the rollout stopped at an earlier batch)")
    attention += [f"hardware: {warning}" for warning in node["warnings"]]
    return {
        "changed": dict(node["changed"]),
        "rebooted": rebooted,
        "reboot_reasons": reasons,
        "attention": attention,
        "notes": node["notes"],
    }


def notes_by_text(report: dict) -> dict[str, list[str]]:
    """Each note once, with the nodes it concerns, in the order first met."""
    hosts_by_note: dict[str, list[str]] = {}
    for host, entry in report.items():
        for note in entry["notes"]:
            hosts_by_note.setdefault(note, []).append(host)
    return hosts_by_note
