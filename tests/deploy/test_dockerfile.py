"""The Dockerfile, parsed (no image is built): multi-stage, slim, pinned by digest, non-root, with a stdlib
healthcheck, and without the simulator: the wheel its build stage makes is built here from exactly the files
it copies, and holds no `sim` package."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

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
    assert build.image == runtime.image
    assert re.fullmatch(r"python:3\.11-slim@sha256:[0-9a-f]{64}", build.image), "pin the base by its digest"
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


# -- no simulator in the production image ---------------------------------------------------------------

IMAGE_SOURCES = {"pyproject.toml", "uv.lock", "README.md", "bot", "handlers"}
"""What the build stage may copy from the repository; sim/ is not among it."""


def build_stage_sources() -> set[str]:
    """Every source path the build stage COPYs from the build context (not --from another stage)."""
    build = parse_stages(DOCKERFILE.read_text(encoding="utf-8"))[0]
    sources: set[str] = set()
    for copy in build.all("COPY"):
        words = [w for w in copy.split() if not w.startswith("--")]
        sources |= {w.rstrip("/") for w in words[:-1]}
    return sources


def test_the_build_stage_copies_no_simulator() -> None:
    assert build_stage_sources() == IMAGE_SOURCES
    ignored = {
        line.strip() for line in (chart.ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    }
    assert "sim" in ignored, "keep sim/ out of the build context too"


def uv() -> str:
    found = sorted(chart.ROOT.glob(".tools/uv-*/bin/uv")) or [Path(p) for p in [shutil.which("uv")] if p]
    if not found:
        pytest.fail("uv is not installed; `make dev` puts it in .tools/")
    return str(found[-1])


@pytest.fixture(scope="module")
def image_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `uv sync --no-editable` builds in the image: from the build stage's files alone."""
    context = tmp_path_factory.mktemp("context")
    for source in build_stage_sources():
        copy = shutil.copytree if (chart.ROOT / source).is_dir() else shutil.copy
        copy(chart.ROOT / source, context / source)
    result = subprocess.run(
        [uv(), "build", "--wheel", "--offline", "--quiet", "-o", str(context / "dist")],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = (context / "dist").glob("gpubot-*.whl")
    return wheel


def test_the_image_wheel_holds_the_bot_and_no_simulator(image_wheel: Path) -> None:
    with zipfile.ZipFile(image_wheel) as wheel:
        packages = {name.split("/", 1)[0] for name in wheel.namelist() if "/" in name}
    assert {"bot", "handlers"} <= packages
    assert "sim" not in packages


def test_without_the_simulator_sim_and_demo_say_so(image_wheel: Path, tmp_path: Path) -> None:
    """The image's `gpubot`: the wheel and the dependencies, without the checkout's editable install."""
    site = next(p for p in sys.path if p.endswith("site-packages"))
    program = (
        f"import sys; sys.path[:0] = [{str(image_wheel)!r}, {site!r}]\n"
        "from bot import cli\nsys.exit(cli.main(sys.argv[1:]))"
    )
    for command in ("sim", "demo"):
        # -S: no site, so the .pth of the checkout's editable install does not put sim/ back.
        done = subprocess.run(
            [sys.executable, "-S", "-c", program, command],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert f"gpubot {command}: this install has no simulator" in done.stderr
