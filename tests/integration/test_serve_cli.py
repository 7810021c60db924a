"""`gpubot serve` as a newcomer first runs it: settings it cannot start with are one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def gpubot() -> list[str]:
    """The installed console script, as a user types it; `python -m bot.cli` where there is none."""
    script = Path(sys.executable).parent / "gpubot"
    return [str(script)] if script.exists() else [sys.executable, "-m", "bot.cli"]


def serve(home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`gpubot serve` with only `env` set: no Slack, cloud or cluster variables from the caller's shell."""
    scrubbed = {"PATH": "/usr/bin:/bin", "HOME": str(home), "GPUBOT_HEALTH_PORT": "0", **env}
    return subprocess.run(
        [*gpubot(), "serve"], env=scrubbed, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    ("env", "named", "unnamed"),
    [
        ({}, ["SLACK_BOT_TOKEN is not set (the bot token, xoxb-", "SLACK_APP_TOKEN is not set"], []),
        ({"SLACK_BOT_TOKEN": "xoxb-1"}, ["SLACK_APP_TOKEN is not set (Socket Mode's"], ["SLACK_BOT_TOKEN"]),
        (
            {"SLACK_MODE": "http", "SLACK_BOT_TOKEN": "xoxb-1"},
            ["SLACK_SIGNING_SECRET is not set (HTTP mode's signing secret"],
            ["SLACK_APP_TOKEN", "SLACK_BOT_TOKEN"],
        ),
        (
            {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "GPUBOT_MAX_GPUS_PER_USER": "lots"},
            ["GPUBOT_MAX_GPUS_PER_USER='lots': expected a whole number"],
            ["SLACK_"],
        ),
    ],
)
def test_settings_it_cannot_start_with_are_one_line_and_exit_2(
    tmp_path: Path, env: dict[str, str], named: list[str], unnamed: list[str]
) -> None:
    done = serve(tmp_path, **env)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("gpubot serve: ") and line.endswith("; see docs/deploy.md"), line
    for words in named:
        assert words in line
    for words in unnamed:
        assert words not in line


def test_a_cluster_it_cannot_reach_is_one_line_after_the_start_up_log(tmp_path: Path) -> None:
    done = serve(
        tmp_path,
        SLACK_BOT_TOKEN="xoxb-1",
        SLACK_APP_TOKEN="xapp-1",
        KUBECONFIG=str(tmp_path / "missing"),
        GPUBOT_LOG_FORMAT="text",
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    *logged, line = done.stderr.splitlines()
    assert [entry for entry in logged if "gpubot starting with" not in entry] == []
    assert line.startswith(f"gpubot serve: cannot load the cluster's credentials from kubeconfig {tmp_path}")
    assert "set KUBECONFIG to a kubeconfig file" in line


def test_the_start_up_log_masks_the_password_of_every_url(tmp_path: Path) -> None:
    """Issue 21: the Prometheus URL's password was written to the log at start-up."""
    done = serve(
        tmp_path,
        SLACK_BOT_TOKEN="xoxb-1",
        SLACK_APP_TOKEN="xapp-1",
        KUBECONFIG=str(tmp_path / "missing"),
        GPUBOT_PROMETHEUS_URL="http://gpu:prom-pass@127.0.0.1:9/",
        REDIS_URL="redis://:redis-pass@127.0.0.1:9/0",
    )
    assert done.returncode == 2, done.stderr
    (started,) = [line for line in done.stderr.splitlines() if "gpubot starting with" in line]
    assert "http://gpu:***@127.0.0.1:9/" in started and "redis://:***@127.0.0.1:9/0" in started
    assert "prom-pass" not in done.stderr and "redis-pass" not in done.stderr
