"""The stage: the embedded cluster, the Slack emulator and a Redis on loopback, the bot pointed at them."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bot import settings
from bot.adapters import store
from sim.cluster import world
from sim.cluster.store import Change
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack

LOOPBACK_UNSAFE_ENV = (
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "SLACK_BOT_TOKEN",
    "SLACK_APP_TOKEN",
)
"""The Slack SDK sends even loopback calls through a proxy, and Bolt prefers tokens from the environment."""
Json = dict[str, Any]
ADMINS = frozenset({"U_ADMIN"})
"""The emulator's admin user, gpubot's admin on every stage."""


@dataclass
class Stage:
    """What a harness plays on; `directory` is the stage's own, for kubeconfigs and logs."""

    sim: world.BackgroundWorld
    slack: BackgroundSlack
    redis_url: str
    directory: Path

    def kubeconfig(self) -> Path:
        """The sim's kubeconfig for the bot and kubectl, written anew: a directory may outlive a sim."""
        path = self.directory / "kubeconfig.yaml"
        path.write_text(yaml.safe_dump(self.sim.world.kubeconfig()))
        return path

    def on_commit(self, listener: Callable[[Change], None]) -> None:
        """`listener` hears every change the sim's store commits, on the sim's thread, as it commits."""
        self.sim.run(lambda: self.sim.world.store.subscribe(listener))

    def traffic(self) -> Json:
        """What the sim's API server has served: requests and watches, each with its User-Agent."""
        found: Json = self.sim.run(self.sim.world.api.traffic.snapshot)
        return found

    def reset_traffic(self) -> None:
        self.sim.run(self.sim.world.api.traffic.reset)


@contextlib.contextmanager
def stage(
    world_config: world.WorldConfig | None = None,
    slack_config: SlackConfig | None = None,
    *,
    redis_url: str = "",
    memory_fallback: bool = False,
    prefix: str = "gpubot-stage-",
) -> Iterator[Stage]:
    """Start the sim, the emulator and a private Redis (or use `redis_url`); stop them all at the end.

    Without redis-server on PATH the stage fails, unless `memory_fallback`: then the bot keeps its Redis
    state in its own process (`store.MEMORY_URL`), as the demo does on a machine without one."""
    with (
        loopback_environment(),
        tempfile.TemporaryDirectory(prefix=prefix) as tmp,
        world.BackgroundWorld(world_config or world.WorldConfig()) as sim,
        # Without a `slack_config`, Slack's rate limits are off: a story, not a load test.
        BackgroundSlack(slack_config or SlackConfig(rate_limits=RateLimitConfig(enabled=False))) as slack,
        contextlib.nullcontext(redis_url) if redis_url else store.private_redis_server() as private,
    ):
        if private is None and not memory_fallback:
            raise RuntimeError("redis-server is not on PATH; install it (Debian: apt install redis-server)")
        yield Stage(sim, slack, private or store.MEMORY_URL, Path(tmp))


def bot_settings(
    stage: Stage,
    *,
    namespace: str = settings.DEFAULT_WORKLOAD_NAMESPACE,
    scale_channel: str = "",
    metrics: bool = False,
) -> settings.Settings:
    """The bot in this process, on the stage: Socket Mode to the emulator, the sim's kubeconfig, the stage's
    Redis; `metrics` reads GPU idleness from the sim's Prometheus API."""
    return settings.Settings(
        slack=settings.SlackSettings(
            bot_token=stage.slack.bot_token,
            app_token=stage.slack.app_token,
            api_base_url=stage.slack.api_url,
            scale_channel=scale_channel,
        ),
        cluster=settings.ClusterSettings(kubeconfig=str(stage.kubeconfig()), namespace=namespace),
        quota=settings.QuotaSettings(admins=ADMINS),
        redis=settings.RedisSettings(url=stage.redis_url),
        reaper=settings.ReaperSettings(prometheus_url=stage.sim.url if metrics else ""),
    )


def serve_environment(stage: Stage, *, namespace: str = "default", **extra: str) -> dict[str, str]:
    """What `gpubot serve` as a process of its own reads, pointed at the stage; `extra` adds or overrides."""
    found = inherited_environment() | {
        "SLACK_BOT_TOKEN": stage.slack.bot_token,
        "SLACK_APP_TOKEN": stage.slack.app_token,
        "SLACK_API_URL": stage.slack.api_url,
        "KUBECONFIG": str(stage.kubeconfig()),
        "REDIS_URL": stage.redis_url,
        "GPUBOT_NAMESPACE": namespace,
        "GPUBOT_ADMINS": ",".join(sorted(ADMINS)),
        "SKIP_SLACK_SDK_WARNING": "1",
        "PYTHONUNBUFFERED": "1",
    }
    return found | extra


def inherited_environment() -> dict[str, str]:
    """This process's environment for a child on the stage, without what would send its loopback calls
    through a proxy (`no_proxy` goes too: without the proxies it only confuses) or override its tokens."""
    found = {k: v for k, v in os.environ.items() if k not in LOOPBACK_UNSAFE_ENV}
    found.pop("no_proxy", None)
    return found


@contextlib.contextmanager
def loopback_environment() -> Iterator[None]:
    saved = {name: os.environ.pop(name) for name in LOOPBACK_UNSAFE_ENV if name in os.environ}
    os.environ.setdefault("SKIP_SLACK_SDK_WARNING", "1")  # the SDK's stderr notice would break the transcript
    try:
        yield
    finally:
        os.environ.update(saved)
