"""The operator's steps of the docs' Deployment section: the certificates it makes and the
Secrets it creates."""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Mapping


def certificate_names(section: str) -> dict[str, tuple[str, list[str]]]:
    """The certificates the docs' Deployment section makes with ``openssl req ... -CA``:
    the file each is written to (``-out``) → its key's file (``-keyout``) and the DNS names
    of its subjectAltName."""
    joined = re.sub(r"\\\n\s*", " ", section)
    found: dict[str, tuple[str, list[str]]] = {}
    for line in joined.splitlines():
        argv = shlex.split(line) if re.match(r"\s*openssl req .*-CA ", line) else []
        sans = [a.partition("=")[2] for a in argv if a.startswith("subjectAltName=")]
        if argv:
            assert sans, f"a certificate without subjectAltName: {line.strip()}"
            names = [name.removeprefix("DNS:") for name in sans[0].split(",")]
            found[argv[argv.index("-out") + 1]] = (argv[argv.index("-keyout") + 1], names)
    return found


def secret_commands(section: str) -> list[list[str]]:
    """The ``kubectl ... create secret generic`` commands of the docs' Deployment section
    (``tests.support.docs.section("Deployment")``, in the README or a docs page), split as
    the shell would (continuation lines joined)."""
    joined = re.sub(r"\\\n\s*", " ", section)
    return [
        # a command substitution is one word to the shell, a <placeholder> one to the operator
        shlex.split(re.sub(r"\$\([^)]*\)|<[^>]*>", lambda m: shlex.quote(m.group(0)), line))
        for line in joined.splitlines()
        if re.match(r"\s*kubectl .*create secret generic ", line)
    ]


def build_secrets(
    commands: list[list[str]], namespace: str, literals: Mapping[str, str], files: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """The Secrets the commands create, each placeholder the docs leave to the operator
    (``literals``: by the text the docs show; ``files``: by file name) filled in; a
    ``$(command)`` that ``literals`` does not give is run as the shell would."""
    created: dict[str, dict[str, str]] = {}
    for argv in commands:
        assert argv[argv.index("-n") + 1] == namespace, f"{shlex.join(argv)}: not in {namespace}"
        name = argv[argv.index("generic") + 1]
        data: dict[str, str] = {}
        for option in argv:
            kind, _, spec = option.partition("=")
            key, _, source = spec.partition("=")
            if kind == "--from-literal":
                if source not in literals and source.startswith("$("):
                    data[key] = _substitute(source)
                    continue
                assert source in literals, f"docs' secret {name}/{key}: no value for {source!r}"
                data[key] = literals[source]
            elif kind == "--from-file":
                assert source in files, f"docs' secret {name}/{key}: no file {source!r}"
                data[key] = files[source]
        created[name] = data
    return created


def _substitute(command: str) -> str:
    """The shell's ``$(command)``: its output, trailing newlines removed."""
    done = subprocess.run(
        ["/bin/sh", "-c", f'printf %s "{command}"'], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0 and done.stdout, f"{command}: {done.stderr}"
    return done.stdout
