"""Prompt templates, keyed by ``(prompt_key, prompt_version)``.

A template is frozen once released: a changed prompt is a new version, and a job records
the key and version it was created with. A template may carry a ``fake`` answer function:
the deterministic fake provider (and the local OpenAI-compatible server) answer with it, so
development and tests get plausible, schema-valid output without a model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.ai.provider import Message

FakeAnswer = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class RenderedPrompt:
    key: str
    version: str
    messages: tuple[Message, ...]
    variables: dict[str, Any]


@dataclass(frozen=True)
class PromptTemplate:
    key: str
    version: str
    system: str
    # str.format template over the variables (lists and objects render as JSON); the
    # variables themselves follow it as a JSON block, after INPUT_MARKER.
    user: str
    fake: FakeAnswer | None = None

    def render(self, variables: dict[str, Any]) -> RenderedPrompt:
        values = {
            k: json.dumps(v, ensure_ascii=False) if isinstance(v, list | dict) else v
            for k, v in variables.items()
        }
        user = (
            self.user.format(**values)
            + INPUT_MARKER
            + json.dumps(variables, ensure_ascii=False, sort_keys=True)
        )
        return RenderedPrompt(
            key=self.key,
            version=self.version,
            messages=(Message("system", self.system), Message("user", user)),
            variables=dict(variables),
        )


INPUT_MARKER = "\n\nInput (JSON):\n"


def variables_in(user_message: str) -> dict[str, Any]:
    """The variables a rendered user message carries ({} when it carries none)."""
    _, marker, block = user_message.rpartition(INPUT_MARKER)
    if not marker:
        return {}
    try:
        value = json.loads(block)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


class PromptNotFound(LookupError):
    pass


_TEMPLATES: dict[tuple[str, str], PromptTemplate] = {}


def register_prompt(template: PromptTemplate) -> PromptTemplate:
    """Adds a template; registering the same one twice is harmless, a different one under
    a released (key, version) is refused."""
    existing = _TEMPLATES.get((template.key, template.version))
    if existing is not None and existing != template:
        raise ValueError(f"prompt {template.key}@{template.version} is already registered")
    _TEMPLATES[(template.key, template.version)] = template
    return template


def get_prompt(key: str, version: str) -> PromptTemplate:
    try:
        return _TEMPLATES[(key, version)]
    except KeyError:
        raise PromptNotFound(f"no prompt {key}@{version}") from None


def find_by_system_text(system: str) -> PromptTemplate | None:
    """The template whose system message is ``system`` (how a stand-in server that sees
    only chat messages knows which prompt it was sent)."""
    return next((t for t in _TEMPLATES.values() if t.system == system), None)
