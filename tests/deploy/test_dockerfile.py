"""The Dockerfile, parsed (no image is built): multi-stage, slim, non-root, with a stdlib healthcheck."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from tests.deploy import chart

DOCKERFILE = chart.ROOT / "Dockerfile"


@dataclass
class Stage:
    image: str
    name: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [argument for word, argument in self.instructions if word == keyword]


def parse_stages(text: str) -> list[Stage]:
    """Instructions per stage, with line continuations joined and comments dropped."""
    joined = re.sub(
        r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    )
    stages: list[Stage] = []
    for line in joined.splitlines():
        if not line.strip():
            continue
        keyword, _, argument = line.strip().partition(" ")
        keyword, argument = keyword.upper(), argument.strip()
        if keyword == "FROM":
            image, _, name = argument.partition(" AS ")
            stages.append(Stage(image.strip(), name.strip()))
        else:
            assert stages, f"{keyword} before the first FROM"
            stages[-1].instructions.append((keyword, argument))
    return stages


def test_the_parser_reads_stages_and_continuations() -> None:
    stages = parse_stages("FROM a AS one\n# note\nRUN x \\\n y\nFROM b\nUSER 5\n")
    assert [(s.image, s.name) for s in stages] == [("a", "one"), ("b", "")]
    assert stages[0].all("RUN") == ["x   y"] and stages[1].all("USER") == ["5"]


def test_a_build_stage_installs_from_the_lock_and_the_runtime_copies_only_the_install() -> None:
    build, runtime = parse_stages(DOCKERFILE.read_text(encoding="utf-8"))
    assert build.image == runtime.image == "python:3.11-slim"
    syncs = [run for run in build.all("RUN") if run.startswith("uv sync")]
    assert syncs and all("--locked" in run and "--no-dev" in run for run in syncs), syncs
    assert "--no-editable" in syncs[-1], "the image must not point back at the build stage's source tree"
    (environment,) = build.all("ENV")
    assert "UV_COMPILE_BYTECODE=1" in environment and "UV_PYTHON_DOWNLOADS=never" in environment
    copies = runtime.all("COPY")
    assert copies and all(c.startswith(f"--from={build.name} ") for c in copies), copies
    assert not any(word in run for run in runtime.all("RUN") for word in ("pip ", "apt-get"))


def test_the_runtime_runs_as_a_numeric_non_root_user() -> None:
    runtime = parse_stages(DOCKERFILE.read_text(encoding="utf-8"))[-1]
    (user,) = runtime.all("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0, "runAsNonRoot can only verify a numeric, non-zero uid"
    assert not gid or (gid.isdigit() and int(gid) != 0)
    pod_security = chart.one(chart.render(), "Deployment")["spec"]["template"]["spec"]["securityContext"]
    assert pod_security["runAsUser"] == int(uid)


def test_the_healthcheck_asks_healthz_with_the_standard_library() -> None:
    runtime = parse_stages(DOCKERFILE.read_text(encoding="utf-8"))[-1]
    (check,) = runtime.all("HEALTHCHECK")
    command = json.loads(check[check.index("CMD") + 3 :].strip())
    assert command[:2] == ["python", "-c"]
    assert "urllib.request" in command[2] and "/healthz" in command[2] and "GPUBOT_HEALTH_PORT" in command[2]
    compile(command[2], "<healthcheck>", "exec")


def test_the_image_runs_gpubot_serve() -> None:
    runtime = parse_stages(DOCKERFILE.read_text(encoding="utf-8"))[-1]
    assert [json.loads(e) for e in runtime.all("ENTRYPOINT")] == [["gpubot"]]
    assert [json.loads(c) for c in runtime.all("CMD")] == [["serve"]]


def test_the_image_and_the_makefile_install_the_same_uv() -> None:
    build = parse_stages(DOCKERFILE.read_text(encoding="utf-8"))[0]
    (argument,) = build.all("ARG")
    makefile = (chart.ROOT / "Makefile").read_text(encoding="utf-8")
    (pinned,) = re.findall(r"^UV_VERSION := (\S+)$", makefile, flags=re.MULTILINE)
    assert argument == f"UV_VERSION={pinned}"
