"""Workloads for the bench: gpubot's own pods made without Slack, GPU pools sized for them, and users.

`/gpu run` through Slack is the real path, and the latency and call-count benches take it. A thousand runs
that way would wait on Slack's pace (one message a second per channel) before the first pod exists, so
the load benches build the very pod `/gpu run` builds (`podspec.build_pod`, the bot's own builder) and
post its thread root as the bot would, straight into the emulator. The bot cannot tell them apart: it
tracks pods by their labels and annotations, which is how it resumes threads after a restart.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from kubernetes import client

from bot import profiles, settings
from bot.core import commands, labels, models, podspec
from sim.cluster import pools, world
from sim.slack import webapi
from sim.slack.runner import BackgroundSlack
from sim.slack.transcript import User

Json = dict[str, Any]
POOL = "gpu-pool"
CUDA = "nvidia/cuda:12.4.1-base-ubuntu22.04"
SMALL = "ubuntu:24.04"
"""An image the sim pulls in 2 s: the latency benches measure the bot, not an image pull."""
SETUP_AGENT = "gpubot-bench/setup"
GKE_POOL_LABEL = "cloud.google.com/gke-nodepool"


def users(count: int) -> tuple[User, ...]:
    """Slack users U0001…, every one a member of each channel; quota is per user, so each runs its own."""
    return tuple(User(f"U{i:04d}", f"user{i:04d}") for i in range(1, count + 1))


def channels(count: int) -> tuple[tuple[str, str], ...]:
    """The users' channels and the scale channel; busy teams spread over a few channels."""
    return (*((f"C_GPU{i:02d}", f"gpu-users-{i:02d}") for i in range(1, count + 1)), ("C_OPS", "gpu-ops"))


def gpu_pool(*, gpus_per_node: int, max_nodes: int, ready_nodes: int = 0) -> pools.NodePool:
    """The seed's GPU pool (label, taint, scale from zero), with room for the workloads a bench runs.

    Eight GPUs a node (p4d.24xlarge) keeps a thousand workloads on 125 nodes, as a real large pool would."""
    machine = "p4d.24xlarge" if gpus_per_node == 8 else "n1-standard-4"
    pool = world.seed_gpu_pool()
    pool.machine_type = machine
    pool.accelerator_type = "nvidia-tesla-a100" if gpus_per_node == 8 else pool.accelerator_type
    pool.accelerator_count = gpus_per_node
    pool.max_size = max_nodes
    pool.target_size = ready_nodes
    return pool


def add_pool(sim: world.BackgroundWorld, pool: pools.NodePool) -> None:
    """Create the pool; its `target_size` nodes are there at once, Ready with GPUs (a warm pool)."""

    def create() -> None:
        made = sim.world.registry.create(pool)
        sim.world.node_ctl.add_ready_nodes(made, made.target_size)

    sim.run(create)


def pool_nodes(sim: world.BackgroundWorld) -> list[Json]:
    return [n for n in sim.nodes() if n["metadata"].get("labels", {}).get(GKE_POOL_LABEL) == POOL]


def nodes_for(workloads: int, gpus_per_node: int) -> int:
    return math.ceil(workloads / gpus_per_node)


@dataclass(frozen=True)
class Made:
    name: str
    channel: str
    thread_ts: str
    owner: str


class Factory:
    """Makes gpubot workloads as `/gpu run` would, numbered so every bench run makes the same ones."""

    def __init__(self, sim: world.BackgroundWorld, slack: BackgroundSlack, *, image: str = CUDA) -> None:
        self.sim, self.slack = sim, slack
        self.api = client.CoreV1Api(_api(sim.url))
        self.profile = profiles.read_profile_catalog(settings.Settings(slack=settings.SlackSettings("x")))
        run = commands.parse_gpu_command(f"run {image} -- sleep 86400")
        assert isinstance(run, models.RunRequest), run
        self.request = run
        self.made: list[Made] = []

    def manifest(self, index: int, channel: str, thread_ts: str) -> Json:
        owner = models.Owner(user_id=f"U{index:04d}", user_name=f"user{index:04d}", team_id="T_GPULAB")
        profile = self.profile.profiles[self.profile.default]
        return podspec.build_pod(
            self.request,
            profile,
            owner,
            now=self.sim.world.clock.datetime(),
            lease=timedelta(hours=24),
            channel=channel,
            thread_ts=thread_ts,
            namespace="default",
        )

    def post_root(self, channel: str, index: int) -> str:
        """The thread root `/gpu run` posts first, as the bot's own message (so the bot may edit it)."""
        text = f"user{index:04d} asked for 1 GPU (t4): `{self.request.image}`. Following it here."
        params = {"channel": channel, "text": text}
        answer = self.slack.run(lambda: webapi.chat_post_message(self.slack.emulator.context, params))
        return str(answer["ts"])

    def make(self, count: int, channel_names: Iterable[str], *, role: str = "") -> list[Made]:
        """`count` more workloads, spread round-robin over `channel_names`; gpubot's own, or with a
        `role`, the same pods without gpubot's label (see `unmanaged`), for a baseline to follow."""
        names = list(channel_names)
        fresh = []
        for _ in range(count):
            index = len(self.made) + 1
            channel = names[index % len(names)]
            thread_ts = self.post_root(channel, index)
            manifest = self.manifest(index, channel, thread_ts)
            if role:
                manifest = unmanaged(manifest, name=f"{role}-{index:04d}", role=role)
            self.api.create_namespaced_pod("default", cast(Any, manifest))  # sent as the dict it is
            made = Made(str(manifest["metadata"]["name"]), channel, thread_ts, f"U{index:04d}")
            self.made.append(made)
            fresh.append(made)
        return fresh


def unmanaged(manifest: Json, *, name: str, role: str) -> Json:
    """The same pod without gpubot's managed-by label, so the bot neither lists nor watches it: what
    `kubectl apply` of the bot's spec would make. Labelled `bench=<role>` for whoever does track it; the
    annotations stay, so a baseline finds the thread root where gpubot would."""
    metadata = manifest["metadata"]
    kept = {k: v for k, v in metadata["labels"].items() if k != labels.MANAGED_BY_LABEL}
    shown = {**metadata, "name": name, "labels": {**kept, "bench": role}}
    return {**manifest, "metadata": shown}


def is_running(pod: Json) -> bool:
    return bool(pod.get("status", {}).get("phase") == "Running")


def _api(url: str) -> client.ApiClient:
    api = client.ApiClient(client.Configuration(host=url))
    api.user_agent = SETUP_AGENT
    return api
