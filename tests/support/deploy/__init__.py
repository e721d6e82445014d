"""Run deployment descriptions as local processes: what tests/deploy/test_manifests_run.py
needs to render ``deploy/k8s`` (``kustomize``: the subset it uses), read ``docker-compose.yml``
(``compose``) and the ``Dockerfile`` (``image``), fill in the docs' Secrets
(``docs_commands``), resolve every reference (``cluster``), and act as kubelet (``kubelet``,
``probes``), kube-proxy (``proxy``) and compose for the processes it starts at their own
loopback addresses (``network``). The rewrites this makes (and why each is needed locally)
are listed once, in that test module's docstring.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
Obj = dict[str, Any]
