"""Adapters: a notebook's Jupyter Server, read through the API server's pod proxy (`pods/proxy` get).

gpubot opens no connection to a pod: the API server proxies `GET …/pods/NAME:PORT/proxy/api/status` and
`…/api/kernels` (jupyter-server/jupyter_server v2.14.1's REST API). Jupyter takes its token from the
query (auth/identity.py IdentityProvider.get_token; the Authorization header is the API server's, which
drops it after authenticating), and the generated method takes no query of its own: its path parameter
carries one, on a client whose `?`, `=` and `&` stay unquoted in path parameters (the API server forwards
a proxied request's query as is). `no_track_activity` keeps the read of the kernels from counting as
activity (base/handlers.py APIHandler.update_api_activity).
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from bot.adapters import kube
from bot.core import notebooks

logger = logging.getLogger(__name__)

PATH_SAFE = "/?=&"
TIMEOUT = (3.05, 5.0)
"""Connect and read seconds: a reaper round reads every idle notebook, and one that hangs must not hold it."""


class JupyterReader:
    """`ports.NotebookActivity` over the bot's API client's configuration (its credentials and server)."""

    def __init__(self, api: client.ApiClient) -> None:
        configuration = copy.deepcopy(api.configuration)
        configuration.safe_chars_for_path_param = PATH_SAFE
        self._core = client.CoreV1Api(client.ApiClient(configuration))

    def jupyter_activity(self, namespace: str, name: str, *, port: int, token: str) -> notebooks.Reading:
        pod = f"{name}:{port}"
        try:
            status = self._get(namespace, pod, f"api/status?token={token}")
            kernels = self._get(namespace, pod, f"api/kernels?no_track_activity=1&token={token}")
        except ApiException as err:
            logger.info("Jupyter of %s/%s not read: %s %s", namespace, name, err.status, err.reason)
            return notebooks.Unread(refusal(err))
        except (urllib3.exceptions.HTTPError, OSError) as err:
            logger.info("Jupyter of %s/%s not read: %s", namespace, name, err)
            return notebooks.Unread("the Kubernetes API could not be reached")
        except ValueError:
            return notebooks.Unread("its Jupyter answered something other than Jupyter Server's API")
        return notebooks.read(status, kernels)

    def _get(self, namespace: str, pod: str, path: str) -> Any:
        # Typed as str, but `_preload_content=False` hands back the urllib3 response itself.
        response: Any = self._core.connect_get_namespaced_pod_proxy_with_path(
            pod, namespace, path, _preload_content=False, _request_timeout=TIMEOUT
        )
        try:
            return json.loads(response.data)
        finally:
            response.release_conn()


def refusal(err: ApiException) -> str:
    """Why it could not be read, in words for its owner: the API server's refusal (a Status), or Jupyter's."""
    from_apiserver = kube.error_body(err).get("kind") == "Status"
    if err.status == 403 and from_apiserver:
        return "gpubot may not use the pod proxy (its Role lacks pods/proxy get)"
    if err.status == 403:
        return "its Jupyter refused the token gpubot read from its log"
    if from_apiserver and err.status is not None and err.status >= 500:
        return "the API server could not reach its Jupyter"
    return f"its Jupyter could not be read (HTTP {err.status})"
