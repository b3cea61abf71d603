"""Raw JSON calls through the official client's pooled connections.

The generated models are skipped on purpose: the client cannot read a Binding's answer, custom resources are
dicts anyway, and a scheduler that binds hundreds of pods a second should not build model objects it never
reads. Non-2xx answers raise ``kubernetes.client.ApiException`` as the generated methods do.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence

from kubernetes.client import ApiException

MERGE_PATCH = "application/merge-patch+json"
# merges a pod's status.conditions by type, leaving its others alone (null drops a field)
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


def now_rfc3339() -> str:
    """The time now as the API writes its timestamps (RFC 3339, UTC, to the second)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def open_request(
    api,
    method: str,
    path: str,
    query: Sequence[tuple[str, str]] = (),
    body: object = None,
    timeout: float | tuple[float, float] | None = 30,
    content_type: str = "application/json",
):
    """The response, body unread: the caller reads it and releases the connection (``release``)."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    method, url, headers, body, _ = api.param_serialize(
        method, path, query_params=list(query), header_params=headers, body=body, auth_settings=["BearerToken"]
    )
    response = api.call_api(method, url, header_params=headers, body=body, _request_timeout=timeout)
    if not 200 <= response.status <= 299:
        try:
            raise ApiException(status=response.status, reason=response.reason, body=response.read())
        finally:
            release(response)
    return response


def release(response) -> None:
    response.response.release_conn()


def call(api, method: str, path: str, **kwargs) -> dict:
    """One request; the decoded JSON answer ({} when empty). The connection goes back to the pool."""
    response = open_request(api, method, path, **kwargs)
    try:
        data = response.read()
    finally:
        release(response)
    return json.loads(data) if data else {}


def stream_lines(response) -> Iterator[str]:
    """The lines of a streamed answer (a watch), as they arrive."""
    from kubernetes.watch.watch import iter_resp_lines

    return iter_resp_lines(response.response)


def api_error(error: ApiException) -> str:
    """The server's message of a refused call, else its status."""
    if error.body is not None:
        with contextlib.suppress(TypeError, ValueError, KeyError):
            return json.loads(error.body)["message"]
    return f"{error.status} {error.reason}"
