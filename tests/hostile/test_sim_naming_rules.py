"""The sim judges names as the API server does, so the end-to-end tests here cannot pass on a lax sim.

Go's `$` anchors at the very end of the text; Python's also matches before a final newline, which made
the sim accept `name\n` where Kubernetes answers 422.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

NEWLINE_ENDED = {
    "name": ({"name": "workload\n"}, "metadata.name"),
    "label value": ({"name": "workload", "labels": {"gpubot.dev/owner": "U01\n"}}, "metadata.labels"),
    "label key": ({"name": "workload", "labels": {"owner\n": "U01"}}, "metadata.labels"),
}


@pytest.mark.parametrize("field", sorted(NEWLINE_ENDED))
def test_a_newline_at_the_end_of_a_name_is_refused_as_kubernetes_refuses_it(
    core: client.CoreV1Api, field: str
) -> None:
    metadata, path = NEWLINE_ENDED[field]
    pod: Any = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
           "spec": {"containers": [{"name": "main", "image": "ubuntu"}]}}  # fmt: skip
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod("default", pod)
    assert refused.value.status == 422 and path in str(refused.value.body)
    assert not core.list_namespaced_pod("default").items
