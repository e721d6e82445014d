"""The client's lowest supported versions: the floor (``>=``) of every dependency in
client/pyproject.toml, as the exact pins ``make test-client-floor`` installs.

``python -m tests.client_floor.floors`` prints them (``protobuf==6.31.1 ...``), so that the
floors are written once, in the client's metadata.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "client"
_FLOOR = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*>=\s*([^,;\s]+)")


def floors() -> dict[str, str]:
    """Each dependency's name and lowest version; one without a floor is an error (the
    test could not say what "lowest" means for it)."""
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    found: dict[str, str] = {}
    for requirement in project["dependencies"]:
        match = _FLOOR.match(requirement)
        if match is None:
            raise ValueError(f"client dependency without a >= floor: {requirement!r}")
        found[match.group(1)] = match.group(2)
    return found


if __name__ == "__main__":
    print(" ".join(f"{name}=={version}" for name, version in floors().items()))
