"""docs/runbooks.md as an on-call engineer uses it: every alert links to its section, and
the commands and metrics the sections name exist as written."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from jobctl.cli import build_parser
from tests.unit.test_observability_files import exported, metric_names

ROOT = Path(__file__).resolve().parents[2]
RUNBOOKS = ROOT / "docs" / "runbooks.md"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yaml"

# what an engineer types for each placeholder
PLACEHOLDERS = {
    "<queue>": "default",
    "<type>": "evaluate_answer",
    "<user>": "user-1",
    "<id>": "7d1d3bd4-9b8e-4c50-9a57-2f1f4b7b4c11",
    "<event id>...": "41 42",
    "<RFC 3339 start>": "2026-12-01T00:00:00Z",
    "<why>": "a reason",
    "<file>": "/tmp/admin.token",
}


def text() -> str:
    return RUNBOOKS.read_text()


def code_spans() -> list[str]:
    """Inline code and the lines of fenced blocks."""
    body = text()
    spans = []
    for block in re.findall(r"```\w*\n(.*?)```", body, flags=re.S):
        spans += [line.split("#")[0].strip() for line in block.splitlines()]
    spans += re.findall(r"(?<!`)`([^`\n]+)`(?!`)", re.sub(r"```.*?```", "", body, flags=re.S))
    return [span for span in spans if span]


def jobctl_commands() -> list[str]:
    commands = []
    for span in code_spans():
        if not span.startswith("jobctl "):
            continue
        for placeholder, value in PLACEHOLDERS.items():
            span = span.replace(placeholder, value)
        assert "<" not in span, f"a placeholder this test does not know: {span}"
        commands.append(span)
    return commands


def test_every_alert_links_to_its_own_section() -> None:
    headings = re.findall(r"^## (\S+)$", text(), flags=re.M)
    rules = [
        rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]
    ]
    assert sorted(headings) == sorted(rule["alert"] for rule in rules)
    for rule in rules:
        url = rule["annotations"].get("runbook_url")
        assert url == f"docs/runbooks.md#{rule['alert'].lower()}", rule["alert"]


def test_the_links_between_sections_name_existing_sections() -> None:
    anchors = {heading.lower() for heading in re.findall(r"^## (\S+)$", text(), flags=re.M)}
    linked = set(re.findall(r"\]\(#([\w-]+)\)", text()))
    assert linked and linked <= anchors, sorted(linked - anchors)


def test_the_finder_reads_the_commands_and_placeholders() -> None:
    commands = jobctl_commands()
    assert "jobctl dead-letters list" in commands
    assert "jobctl resume default" in commands
    assert len(commands) >= 15


@pytest.mark.parametrize("command", jobctl_commands())
def test_every_jobctl_command_parses_as_written(command: str) -> None:
    try:
        build_parser().parse_args(shlex.split(command)[1:])
    except SystemExit as exit:
        pytest.fail(f"jobctl refuses {command!r} (exit {exit.code})")


def test_every_metric_named_exists() -> None:
    known = exported()
    named = set(re.findall(r"\bjobs_[a-z0-9_]*[a-z0-9]", text()))
    # '`jobs_rate_limit_*`' names a family; 'jobs_*' and jobs.events.* are not metrics
    named = {name for name in named if not name.endswith("_limit")}
    queries = [span for span in code_spans() if "(" in span and "jobs_" in span]
    for query in queries:
        named |= metric_names(query)
    assert {"jobs_outbox_oldest_due_age_seconds", "jobs_lease_disconnects_total"} <= named
    assert not named - known, sorted(named - known)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    words = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return words.replace(" ", "-")


def test_the_slug_is_githubs() -> None:
    assert slug("Metrics (Prometheus)") == "metrics-prometheus"
    assert slug("Amendment (issue 25): crash detection, by process") == (
        "amendment-issue-25-crash-detection-by-process"
    )


def test_every_link_leads_to_a_file_and_heading_that_exist() -> None:
    links = re.findall(r"\]\(([^)#\s]*)(?:#([\w-]+))?\)", text())
    assert len(links) > 20
    for path, anchor in links:
        target = (RUNBOOKS.parent / path).resolve() if path else RUNBOOKS
        assert target.is_file(), path
        if anchor and target.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", target.read_text(), flags=re.M)
            assert anchor in {slug(h) for h in headings}, f"{path}#{anchor}"
