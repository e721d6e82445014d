"""Content-safety checks a job type may switch on (``ai_job_definition(content_safety=)``).

A checker looks at text (the rendered prompt before the call, the output after it) and
names the rule it broke, or returns None. A blocked job fails with CONTENT_SAFETY_BLOCKED,
which is never retried. ``RuleBasedChecker`` is deliberately simple — regular expressions;
any object with the same ``check`` method (a moderation API client, ...) plugs in instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol


class SafetyChecker(Protocol):
    def check(self, text: str) -> str | None:
        """The name of the rule ``text`` breaks, or None when it passes."""
        ...


@dataclass(frozen=True)
class RuleBasedChecker:
    rules: tuple[tuple[str, re.Pattern[str]], ...]

    @classmethod
    def of(cls, rules: Iterable[tuple[str, str]]) -> RuleBasedChecker:
        return cls(tuple((name, re.compile(p, re.IGNORECASE)) for name, p in rules))

    def check(self, text: str) -> str | None:
        return next((name for name, pattern in self.rules if pattern.search(text)), None)


# A small default: prompt-injection markers and credential-looking strings. Rule names are
# what operators see; the matched text itself is never reported.
DEFAULT_CHECKER = RuleBasedChecker.of(
    [
        ("prompt_injection", r"ignore (all )?(previous|prior|above) instructions"),
        ("prompt_injection", r"忽略(之前|以上|上面)的(所有)?(指令|提示)"),
        ("credential_leak", r"\bsk-[A-Za-z0-9]{20,}"),
        ("credential_leak", r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    ]
)
