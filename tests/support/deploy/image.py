"""What the Dockerfile gives every container of the image, and a site that refuses what the
image does not install."""

from __future__ import annotations

import json
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.deploy import ROOT


@dataclass(frozen=True)
class Image:
    """What the Dockerfile gives every container of the image: environment, working
    directory, entrypoint and command."""

    env: dict[str, str]
    workdir: str
    entrypoint: list[str]
    cmd: list[str]


def dockerfile_image(path: Path) -> Image:
    text = re.sub(r"\\\n", " ", path.read_text())
    env: dict[str, str] = {}
    workdir, entrypoint, cmd = "/", list[str](), list[str]()
    for line in text.splitlines():
        instruction, _, rest = line.strip().partition(" ")
        if instruction == "ENV":
            env.update(dict(pair.split("=", 1) for pair in shlex.split(rest)))
        elif instruction == "WORKDIR":
            workdir = rest.strip()
        elif instruction == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif instruction == "CMD":
            cmd = json.loads(rest)
    return Image(env, workdir, entrypoint, cmd)


_IMAGE_SITE = """\
# Written by tests/support/deploy/image.py: this interpreter has more installed than the image
# (the dev and embedded extras); refuse those, as the image would not have them.
import sys

NOT_IN_IMAGE = frozenset({blocked!r})


class NotInImage:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] in NOT_IN_IMAGE:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not in the image)", name=name)
        return None


sys.meta_path.insert(0, NotInImage)
"""


def image_site(directory: Path) -> Path:
    """``directory`` with a ``sitecustomize`` refusing every module of a distribution the
    image does not install (it has the base image's pip, requirements.lock and the project),
    for PYTHONPATH."""
    import importlib.metadata

    lock = (ROOT / "requirements.lock").read_text()
    allowed = {_normal(n) for n in re.findall(r"^([A-Za-z0-9][\w.-]*)==", lock, re.M)}
    allowed |= {"durable-jobs", "durable-jobs-client", "pip"}
    by_module = importlib.metadata.packages_distributions()
    blocked = sorted(
        module
        for module, owners in by_module.items()
        if not {_normal(d) for d in owners} & allowed
        and module not in sys.stdlib_module_names
        and not module.startswith("__editable__")
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(_IMAGE_SITE.format(blocked=blocked))
    return directory


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
