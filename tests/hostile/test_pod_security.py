"""The pods the real bot creates carry the configured security settings, and no command text gets more.

The configuration is read as an operator writes it (`Settings.from_env`: GPUBOT_RUN_AS_NON_ROOT,
GPUBOT_RUN_AS_USER, GPUBOT_READ_ONLY_ROOT_FILESYSTEM), the bot runs on the sim, and users type commands
that try to ask for privilege: as options (refused by the parser) or as the workload's own argv
(accepted, and run as that argv in a container that has no privilege to escalate to).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot import runtime, settings
from bot.core import models
from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import CUDA, WAIT, Json, bot_settings, gpubot_pods, running_bot

HARDENED_ENV = {
    "GPUBOT_RUN_AS_NON_ROOT": "true",
    "GPUBOT_RUN_AS_USER": "1000",
    "GPUBOT_READ_ONLY_ROOT_FILESYSTEM": "1",
}
ASKING_FOR_MORE = (
    f"run {CUDA} --privileged -- sh",
    f"run {CUDA} --securityContext=privileged -- id",
    f"run {CUDA} --hostPath / -- ls /host",
    f"run {CUDA} --volume /:/host -- ls /host",
    f"run {CUDA} --cap-add SYS_ADMIN -- id",
    f"run {CUDA} --user 0 -- id",
)
"""Refused by the parser: there is no such option."""
ARGV_ONLY = (
    f"run {CUDA} -- --privileged=true",
    f"run {CUDA} -- nsenter -t 1 -m -u -i -n sh",
    f"run {CUDA} -- sh -c 'mount -t proc proc /host; chroot /host'",
)
"""Accepted: a workload may run whatever it likes, inside the container it was given."""


def security_from(environ: dict[str, str]) -> models.PodSecurity:
    tokens = {"SLACK_BOT_TOKEN": "xoxb-unused", "SLACK_APP_TOKEN": "xapp-unused"}
    return settings.Settings.from_env({**tokens, **environ}).cluster.pod_security


@pytest.fixture(params=["defaults", "hardened"])
def configured(
    request: pytest.FixtureRequest,
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    tmp_path: Path,
    redis_url: str,
) -> Iterator[tuple[runtime.Bot, models.PodSecurity]]:
    security = security_from(HARDENED_ENV if request.param == "hardened" else {})
    config = bot_settings(sim, slack, tmp_path, redis_url)
    config = dataclasses.replace(config, cluster=dataclasses.replace(config.cluster, pod_security=security))
    with running_bot(config, slack) as bot:
        yield bot, security


def expected_spec_security(security: models.PodSecurity) -> tuple[Json, Json]:
    pod: Json = {"seccompProfile": {"type": "RuntimeDefault"}}
    if security.run_as_non_root:
        pod["runAsNonRoot"] = True
    if security.run_as_user is not None:
        pod["runAsUser"] = security.run_as_user
    container = {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": security.read_only_root_filesystem,
        "capabilities": {"drop": ["ALL"]},
    }
    return pod, container


def test_the_hardened_settings_are_read_from_the_environment() -> None:
    assert security_from(HARDENED_ENV) == models.PodSecurity(
        run_as_non_root=True, run_as_user=1000, read_only_root_filesystem=True
    )
    assert security_from({}) == models.PodSecurity()
    with pytest.raises(settings.SettingsError, match="contradicts"):
        security_from({"GPUBOT_RUN_AS_NON_ROOT": "true", "GPUBOT_RUN_AS_USER": "0"})


def test_created_pods_carry_the_configured_security_whatever_is_typed(
    sim: world.BackgroundWorld, slack: BackgroundSlack, configured: tuple[runtime.Bot, models.PodSecurity]
) -> None:
    _, security = configured
    for text in ASKING_FOR_MORE:
        delivery = slack.type_command("U_ALICE", "C_GPU", "/gpu", text)
        assert "Unknown option" in (delivery.ack_payload or {}).get("text", ""), text
    for user, text in zip(("U_ALICE", "U_BOB", "U_ADMIN"), ARGV_ONLY, strict=True):
        assert slack.type_command(user, "C_GPU", "/gpu", text).acked

    def all_made() -> list[Json]:
        found = gpubot_pods(sim)
        return found if len(found) == len(ARGV_ONLY) else []

    pods = slack.wait_until(all_made, timeout=WAIT)

    pod_context, container_context = expected_spec_security(security)
    for pod in pods:
        spec = pod["spec"]
        (container,) = spec["containers"]
        assert spec["securityContext"] == pod_context
        assert container["securityContext"] == container_context
        assert not {"volumes", "hostNetwork", "hostPID", "hostIPC", "hostUsers"} & set(spec)
        assert spec["automountServiceAccountToken"] is False and "volumeMounts" not in container
        assert "args" not in container and container["command"][0] in ("--privileged=true", "nsenter", "sh")
