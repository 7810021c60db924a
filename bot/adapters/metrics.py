"""Prometheus adapter: each pod's GPU utilisation from the DCGM exporter's series, over the HTTP API.

One instant query of a range selector (`DCGM_FI_DEV_GPU_UTIL{namespace=..,pod=~"a|b"}[45m]`)
returns the raw samples, so the maximum, the sample count and the newest sample time all come from
what was really scraped, not from values Prometheus would fill in between scrapes.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import urllib3

from bot import settings
from bot.core import backoff, errors
from bot.core.idleness import Utilisation

logger = logging.getLogger(__name__)

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
PERCENT_PER_UNIT = {GPU_UTIL: 1.0, GR_ENGINE_ACTIVE: 100.0}
"""GPU_UTIL is a percentage already; GR_ENGINE_ACTIVE is a ratio of 0-1."""
REGEX_SPECIAL = re.compile(r"[\\.+*?()|\[\]{}^$]")

Samples = dict[float, float]
"""Sample time (Unix seconds) to value, for one GPU."""


class PrometheusMetrics:
    """Reads one DCGM metric from a Prometheus-compatible API (Prometheus, Thanos, Mimir, the sim)."""

    def __init__(self, base_url: str, *, metric: str = GPU_UTIL, timeout: float = 10.0) -> None:
        if metric not in PERCENT_PER_UNIT:
            raise ValueError(f"metric must be one of {', '.join(PERCENT_PER_UNIT)}, not {metric!r}")
        if not base_url.startswith(("http://", "https://")):
            shown = settings.redact_url(base_url)
            raise ValueError(f"the Prometheus URL must start with http:// or https://, not {shown!r}")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        bare, credentials = settings.strip_credentials(base_url)
        self.metric = metric
        self.timeout = timeout
        self._url = bare.rstrip("/") + "/api/v1/query"
        """Without the credentials, so every error and log line that names it is safe to show."""
        auth = urllib3.make_headers(basic_auth=credentials) if credentials else {}
        self._http = urllib3.PoolManager(timeout=urllib3.Timeout(total=timeout), retries=False, headers=auth)

    def close(self) -> None:
        self._http.clear()

    def gpu_utilisation(
        self, namespace: str, pods: Sequence[str], *, window: timedelta, at: datetime
    ) -> dict[str, Utilisation]:
        """Utilisation over `(at - window, at]` per pod that has samples; pods without any are absent."""
        if at.tzinfo is None:
            raise ValueError("at must be timezone-aware")
        if window <= timedelta(0):
            raise ValueError("window must be positive")
        if not pods:
            return {}
        data = self._query(range_query(self.metric, namespace, pods, window), at)
        try:
            by_gpu = _samples_by_pod_and_gpu(data, wanted=set(pods))
        except (KeyError, TypeError, ValueError) as err:
            raise errors.Unavailable(f"unexpected answer from Prometheus at {self._url}: {err!r}") from err
        scale = PERCENT_PER_UNIT[self.metric]
        summaries = {pod: _summarise(gpus, scale) for pod, gpus in by_gpu.items()}
        return {pod: summary for pod, summary in summaries.items() if summary is not None}

    def _query(self, promql: str, at: datetime) -> Any:
        fields = {"query": promql, "time": f"{at.timestamp():.3f}", "timeout": f"{self.timeout:g}"}
        logger.debug("prometheus query %s at %s", promql, at.isoformat())
        try:
            response = self._http.request("POST", self._url, fields=fields, encode_multipart=False)
        except urllib3.exceptions.HTTPError as err:
            raise errors.Unavailable(f"Prometheus at {self._url} did not answer: {err}") from err
        body = _json(response.data)
        reason = body.get("error", "") if isinstance(body, dict) else ""
        if response.status == 429:
            raise errors.RateLimited(
                reason or "rate limited", retry_after=backoff.retry_after(response.headers)
            )
        if response.status >= 500:
            raise errors.Unavailable(f"Prometheus at {self._url} answered {response.status}: {reason}")
        if response.status >= 300:
            raise errors.Invalid(f"Prometheus at {self._url} refused the query ({response.status}): {reason}")
        if not isinstance(body, dict) or body.get("status") != "success":
            raise errors.Unavailable(f"unexpected answer from Prometheus at {self._url}: {str(body)[:200]}")
        return body.get("data")


def range_query(metric: str, namespace: str, pods: Sequence[str], window: timedelta) -> str:
    """`metric{namespace="ns",pod=~"a|b"}[1800s]`, with names escaped for the regex and the string."""
    alternatives = "|".join(REGEX_SPECIAL.sub(lambda m: "\\" + m.group(), p) for p in sorted(set(pods)))
    return f"{metric}{{namespace={_quote(namespace)},pod=~{_quote(alternatives)}}}[{duration(window)}]"


def duration(window: timedelta) -> str:
    """A PromQL duration: whole seconds when exact, milliseconds otherwise."""
    millis = round(window.total_seconds() * 1000)
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _samples_by_pod_and_gpu(data: Any, *, wanted: set[str]) -> dict[str, dict[str, Samples]]:
    """Samples per pod and per GPU (its UUID), merging series of one GPU whose other labels changed."""
    if data["resultType"] != "matrix":
        raise ValueError(f"resultType {data['resultType']!r}, expected 'matrix'")
    out: dict[str, dict[str, Samples]] = {}
    for series in data["result"]:
        labels = series["metric"]
        pod = labels.get("pod", "")
        if pod not in wanted:
            continue
        samples = out.setdefault(pod, {}).setdefault(labels.get("UUID") or labels.get("gpu", ""), {})
        for stamp, text in series["values"]:
            value = float(text)
            if not math.isnan(value):  # an unknown reading counts as no sample, never as idle
                samples[float(stamp)] = value
    return out


def _summarise(gpus: Mapping[str, Samples], scale: float) -> Utilisation | None:
    """The pod's peak over all its GPUs; coverage and freshness of its worst-covered GPU."""
    if not gpus or not all(gpus.values()):
        return None
    peak = max(max(samples.values()) for samples in gpus.values())
    return Utilisation(
        max_percent=peak * scale,
        samples=min(len(samples) for samples in gpus.values()),
        newest=datetime.fromtimestamp(min(max(samples) for samples in gpus.values()), UTC),
    )
