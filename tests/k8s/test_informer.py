"""The adapter's informer against the real API server: list, watch from the list's version, resume after a
dropped connection. (A 410 Gone cannot be brought about here: this API server's watch cache serves every version
it holds, even after an etcd compaction.)"""

import threading

from kubernetes import client

from railforge.k8s.informer import Informer, Resource
from railforge.testbed.controlplane import create_namespace
from railforge.testbed.procs import wait_for


def config_map(name: str) -> dict:
    return {"metadata": {"name": name}, "data": {"k": name}}


def test_it_follows_changes_and_resumes_after_a_dropped_connection(control_plane):
    namespace = "informer"
    create_namespace(control_plane, namespace)
    core = client.CoreV1Api(control_plane.api)
    core.create_namespaced_config_map(namespace, config_map("before"))
    api = control_plane.client()
    changes = threading.Event()
    informer = Informer(api, Resource("ConfigMap", f"/api/v1/namespaces/{namespace}/configmaps"), changes.set)
    informer.start()
    try:

        def names() -> set[str]:
            return {obj["metadata"]["name"] for obj in informer.items()} - {"kube-root-ca.crt"}

        wait_for("the list", lambda: informer.synced.is_set() and names() == {"before"}, 30)
        core.create_namespaced_config_map(namespace, config_map("added"))
        wait_for("an added object", lambda: names() == {"before", "added"}, 30)
        assert informer.relists == 1

        # a dropped connection: the informer resumes from the version it saw, without a relist
        wait_for("a watch open", lambda: informer.response is not None, 30)
        informer.response.response.shutdown()
        core.delete_namespaced_config_map("before", namespace)
        wait_for("a deletion after the reconnect", lambda: names() == {"added"}, 30)
        assert informer.relists == 1

    finally:
        informer.stop()
        informer.thread.join(timeout=10)
        api.close()
    assert not informer.thread.is_alive()  # stop() ends the open watch at once


def test_a_change_the_trim_drops_is_kept_without_a_pass(control_plane):
    """A change only in what the trim drops (here a ConfigMap's data, as the reporter's conditions are a pod's)
    starts no scheduling pass and keeps the stored object, at the new resourceVersion (a Binding names it)."""
    namespace = "informer-trim"
    create_namespace(control_plane, namespace)
    core = client.CoreV1Api(control_plane.api)
    core.create_namespaced_config_map(namespace, config_map("cm"))
    api = control_plane.client()
    changes: list[str] = []
    resource = Resource(
        "ConfigMap",
        f"/api/v1/namespaces/{namespace}/configmaps",
        field_selector="metadata.name=cm",
        trim=lambda obj: {"metadata": obj["metadata"]},
    )
    informer = Informer(api, resource, lambda: changes.append("pass"))
    informer.start()
    try:
        wait_for("the list", informer.synced.is_set, 30)
        listed, stored = len(changes), informer.get(namespace, "cm")
        updated = core.patch_namespaced_config_map("cm", namespace, {"data": {"k": "changed"}})
        version = updated.metadata.resource_version
        wait_for("the new version", lambda: informer.get(namespace, "cm")["metadata"]["resourceVersion"] == version, 30)
        assert len(changes) == listed and informer.get(namespace, "cm") is stored
        core.patch_namespaced_config_map("cm", namespace, {"metadata": {"labels": {"a": "b"}}})
        wait_for("a pass for a kept field", lambda: len(changes) == listed + 1, 30)
    finally:
        informer.stop()
        api.close()


def test_a_kind_the_server_does_not_serve_counts_as_none_until_it_does(control_plane):
    api = control_plane.client()
    path = "/apis/railforge.example/v1/widgets"  # no such CRD
    informer = Informer(api, Resource("Widget", path), lambda: None).start()
    try:
        wait_for("the informer to count widgets as none", informer.synced.is_set, 30)
        assert informer.items() == [] and informer.relists == 0
    finally:
        informer.stop()
        api.close()
