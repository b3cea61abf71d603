"""A kube-scheduler of the test bed started from a configuration file (the arena's coscheduling peer, the QPS
benchmark): what goes into the file and what stays a flag. The process itself runs in the test bed and the arena."""

import json

from railforge.testbed import controlplane, pki
from railforge.testbed.controlplane import ControlPlane


def test_the_kubeconfig_and_leader_election_move_into_the_file_beside_the_callers_fields(tmp_path, monkeypatch):
    plane = ControlPlane(tmp_path, pki.CertificateAuthority(tmp_path / "pki"), "https://127.0.0.1:6443", tmp_path / "a")
    started = {}
    monkeypatch.setattr(controlplane, "binary", lambda name: f"/built/{name}")
    monkeypatch.setattr(plane, "_start_scheduler", lambda name, argv: started.update(name=name, argv=argv))
    profile = {"schedulerName": "default-scheduler", "plugins": {"multiPoint": {"enabled": [{"name": "Coscheduling"}]}}}
    configuration = {"clientConnection": {"qps": 100, "burst": 100}, "profiles": [profile]}

    plane.start_configured_scheduler("peer", "kube-scheduler-plugins", configuration)

    argv = started["argv"]
    assert started["name"] == "peer" and argv[:2] == ["/built/kube-scheduler-plugins", f"--config={tmp_path}/peer.yaml"]
    # ignored beside a configuration file: never passed, so nothing looks set that is not
    assert not [flag for flag in argv if flag.startswith(("--kubeconfig", "--leader-elect"))], argv
    assert any(flag.startswith("--secure-port=") for flag in argv) and "--bind-address=127.0.0.1" in argv
    written = json.loads((tmp_path / "peer.yaml").read_text())
    assert written["kind"] == "KubeSchedulerConfiguration" and written["leaderElection"] == {"leaderElect": False}
    assert written["clientConnection"] == {"kubeconfig": str(tmp_path / "peer.conf"), "qps": 100, "burst": 100}
    assert written["profiles"] == [profile]
    assert (tmp_path / "peer.conf").read_text().count("server: https://127.0.0.1:6443") == 1
