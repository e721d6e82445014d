"""What the Dockerfile gives every container of each image (one per target), and a site that
refuses what an image does not install."""

from __future__ import annotations

import json
import re
import shlex
import sys
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from tests.support.deploy import ROOT

# An image of this project is named for its Dockerfile target: durable-jobs-<target>.
ENGINE_PREFIX = "durable-jobs-"


@dataclass
class Image:
    """What the Dockerfile gives every container of one image (one target): environment,
    working directory, entrypoint and command, and which of the project's packages it
    carries (copied into it; the rest are not in the image)."""

    env: dict[str, str]
    workdir: str
    entrypoint: list[str]
    cmd: list[str]
    target: str = ""
    packages: frozenset[str] = frozenset()


def dockerfile_images(path: Path) -> dict[str, Image]:
    """Each stage of the Dockerfile as the image ``docker build --target <stage>`` makes,
    by stage name (a stage inherits its parent's); ``""`` is the last stage (a build
    without ``--target``)."""
    text = re.sub(r"\\\n", " ", path.read_text())
    stages: dict[str, Image] = {}
    image: Image | None = None
    for line in text.splitlines():
        instruction, _, rest = line.strip().partition(" ")
        if not instruction or instruction.startswith("#"):
            continue
        if instruction == "FROM":
            words = rest.split()
            parent = stages.get(words[0], Image({}, "/", [], []))
            name = words[2] if len(words) > 2 and words[1].upper() == "AS" else ""
            image = replace(parent, env=dict(parent.env), target=name)
            stages[name] = image
            continue
        assert image is not None, f"{path}: {instruction} before FROM"
        if instruction == "ENV":
            image.env.update(dict(pair.split("=", 1) for pair in shlex.split(rest)))
        elif instruction == "WORKDIR":
            image.workdir = rest.strip()
        elif instruction == "ENTRYPOINT":
            image.entrypoint = json.loads(rest)
        elif instruction == "CMD":
            image.cmd = json.loads(rest)
        elif instruction == "COPY" and rest.split()[0] in project_packages():
            image.packages |= {rest.split()[0]}
    assert image is not None, f"{path}: no FROM"
    stages[""] = image
    return stages


def engine_image(images: dict[str, Image], reference: str) -> Image | None:
    """The image a container reference (``durable-jobs-worker:0.1.0``) names, built from the
    Dockerfile target of that name; None for an image that is not this project's."""
    name = reference.partition(":")[0]
    if not name.startswith(ENGINE_PREFIX):
        return None
    target = name.removeprefix(ENGINE_PREFIX)
    assert target in images, f"image {reference}: the Dockerfile has no target {target!r}"
    return images[target]


def project_packages() -> frozenset[str]:
    """The project's top-level packages (pyproject's packages.find include)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    return frozenset(p.rstrip("*") for p in include)


_IMAGE_SITE = """\
# Written by tests/support/deploy/image.py: this interpreter has more installed than the image
# (the dev and embedded extras, the project's packages the image does not copy); refuse
# those, as the image would not have them.
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


def image_site(directory: Path, image: Image) -> Path:
    """``directory`` with a ``sitecustomize`` refusing every module of a distribution
    ``image`` does not install (it has the base image's pip, requirements.lock and the
    project) and every package of the project it does not copy (the job-service image has no
    ``jobtypes``), for PYTHONPATH."""
    import importlib.metadata

    lock = (ROOT / "requirements.lock").read_text()
    allowed = {_normal(n) for n in re.findall(r"^([A-Za-z0-9][\w.-]*)==", lock, re.M)}
    allowed |= {"durable-jobs", "durable-jobs-client", "pip"}
    by_module = importlib.metadata.packages_distributions()
    blocked = sorted(
        {
            module
            for module, owners in by_module.items()
            if not {_normal(d) for d in owners} & allowed
            and module not in sys.stdlib_module_names
            and not module.startswith("__editable__")
        }
        | (project_packages() - image.packages)
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(_IMAGE_SITE.format(blocked=blocked))
    return directory


class ImageSites:
    """One ``image_site`` per image, made under ``root`` when first asked for (a container
    of an image that is not this project's gets one refusing the whole project)."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._sites: dict[str, Path] = {}

    def __call__(self, image: Image | None) -> Path:
        target = image.target if image else ""
        if target not in self._sites:
            self._sites[target] = image_site(
                self._root / (target or "none"), image or Image({}, "/", [], [])
            )
        return self._sites[target]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
