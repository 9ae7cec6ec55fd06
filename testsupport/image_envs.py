"""One Python environment per training image's package set (image_sets/), for the image matrix.

``ensure(image_set)`` returns the environment's Python, building it on first use: the
image's Python minor version (from pyenv, or ``python3.X`` on PATH), then every package the
file pins, installed with uv; whatever the image leaves to the resolver is resolved as of the
image's build date (``--exclude-newer``), as it was when the image was built.

Environments live outside the clone, under ``$FTL_IMAGE_ENVS`` (default
``~/.cache/ftl/image-envs``), one folder per file named ``<file>-<sha256 of the file>[:12]``:
editing the file builds a new one, and a warm run finds the folder and costs nothing. A
build goes to a temporary folder and is renamed into place when complete, under a file
lock; the marker file is written last, so parallel test workers and interrupted builds never
use half an environment (a folder without the marker is built again). A venv is built in
place, not moved: its scripts (``torchrun``) name its own path.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from image_sets import ImageSet

MARKER = "ftl-image-env.json"


class EnvBuildError(RuntimeError):
    pass


def cache_root() -> Path:
    root = os.environ.get("FTL_IMAGE_ENVS") or os.path.join(
        os.path.expanduser("~"), ".cache", "ftl", "image-envs"
    )
    return Path(root)


def env_dir(image_set: ImageSet) -> Path:
    return cache_root() / f"{image_set.name}-{image_set.digest()[:12]}"


def find_python(minor: str) -> str:
    """A CPython of ``minor`` (``3.9``): pyenv's newest patch release, else ``python3.9``."""
    pyenv = os.environ.get("PYENV_ROOT") or os.path.join(os.path.expanduser("~"), ".pyenv")
    found = sorted(
        glob.glob(os.path.join(pyenv, "versions", f"{minor}.*", "bin", "python")),
        key=lambda p: [int(x) for x in p.split("/versions/")[1].split("/")[0].split(".")],
    )
    if found:
        return found[-1]
    exe = shutil.which(f"python{minor}")
    if exe:
        return exe
    raise EnvBuildError(f"no Python {minor} here (pyenv or python{minor} on PATH)")


def uv() -> str:
    here = Path(sys.executable).parent / "uv"
    exe = str(here) if here.exists() else shutil.which("uv")
    if not exe:
        raise EnvBuildError("uv is not installed (requirements-dev.txt pins it)")
    return exe


def python_of(path: Path) -> Path:
    return path / "bin" / "python"


def _build(image_set: ImageSet, target: Path) -> None:
    tmp = target
    try:
        python = find_python(image_set.python_minor)
        subprocess.run([uv(), "venv", "-q", "-p", python, str(tmp)], check=True)
        reqs = tmp / "requirements.txt"
        # pip and setuptools as the image has them (the toolkit runs ``pip install -r
        # requirements.txt``; old accelerate imports pkg_resources), resolved as of the build date.
        reqs.write_text("\n".join([*image_set.requirements(), "pip", "setuptools"]) + "\n")
        cmd = [
            uv(),
            "pip",
            "install",
            "-q",
            "--python",
            str(python_of(tmp)),
            "--exclude-newer",
            image_set.build_date,
            "--index-strategy",
            "unsafe-best-match",
            "-r",
            str(reqs),
        ]
        started = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise EnvBuildError(
                f"building the environment of {image_set.name} failed:\n{done.stderr[-4000:]}"
            )
        (tmp / MARKER).write_text(
            json.dumps(
                {
                    "image_set": image_set.name,
                    "digest": image_set.digest(),
                    "python": python,
                    "seconds": round(time.monotonic() - started, 1),
                },
                indent=2,
            )
        )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def ensure(image_set: ImageSet) -> Path:
    """The environment's ``bin/python``, built first when it is not in the cache."""
    target = env_dir(image_set)
    if (target / MARKER).is_file():
        return python_of(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / MARKER).is_file():
            shutil.rmtree(target, ignore_errors=True)
            _build(image_set, target)
    return python_of(target)


def main(argv: list[str] | None = None) -> int:
    """``python -m testsupport.image_envs [NAME ...]``: build (or find) the environments."""
    from image_sets import all_sets

    names = argv if argv is not None else sys.argv[1:]
    sets = all_sets()
    for name in names or sorted(sets):
        started = time.monotonic()
        path = ensure(sets[name])
        print(f"{name}: {path} ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
