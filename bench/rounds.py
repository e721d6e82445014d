"""Before/after comparison of ``make bench``: alternating rounds on one machine, medians,
ranges and the median of the per-round ratios.

    git worktree add ../base <commit> && make -C ../base install
    python -m bench.rounds --before ../base --after . --rounds 4 --out runs/
    python -m bench.rounds --before ../base --after . --e2e-args "--seconds 30" --out runs/
    python -m bench.rounds --out runs/          # only summarise runs/ (rN-before.txt ...)

Each round runs ``python -m bench.e2e`` (with that tree's own .venv, and ``--e2e-args``) in
the "before" tree and in the "after" tree, one after the other, and keeps each output in
``--out`` as ``r<round>-<side>.txt``; the summary reads every such file there. On a shared
machine the absolute figures move with the load; a ratio taken within a round (same
minutes, same load) is the figure to compare. The side that runs second in a round tends to
measure worse (seen here: each side lost when it ran second), so the rounds alternate which
side goes first: odd rounds "before" first, even rounds "after" first. Use an even number
of rounds.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
from pathlib import Path

# The e2e output's labels, and which way is better.
FIGURES = {
    "PostgreSQL ceiling": ("PostgreSQL ceiling, 2-row tx/s", "higher"),
    "create (": ("create, jobs/s", "higher"),
    "backlog drain (": ("backlog drain, jobs/s", "higher"),
    "backlog drain, first 99": ("backlog drain, first 99 %, jobs/s", "higher"),
    "create+process": ("create + process, jobs/s", "higher"),
    ": p50 ms": ("steady 200/s p50, ms", "lower"),
    ": p99 ms": ("steady 200/s p99, ms", "lower"),
    "steady: job_service CPU ms per job": ("steady: job_service CPU ms per job", "lower"),
    "steady: workers CPU ms per job": ("steady: workers CPU ms per job", "lower"),
    "steady: postgres CPU ms per job": ("steady: postgres CPU ms per job", "lower"),
    "create: job_service CPU": ("create: job_service CPU ms per job", "lower"),
    "create: postgres CPU": ("create: postgres CPU ms per job", "lower"),
    "drain: job_service CPU": ("drain: job_service CPU ms per job", "lower"),
    "drain: postgres CPU": ("drain: postgres CPU ms per job", "lower"),
    "re-sent by the reconciler": ("jobs re-sent by the reconciler", "lower"),
    "longest wait to start": ("longest wait to start, s", "lower"),
}
ROUND_FILE = re.compile(r"r(\d+)-(\w+)\.txt$")


def parse(path: Path) -> dict[str, float]:
    values: dict[str, float] = {}
    for line in path.read_text().splitlines():
        for label, (name, _) in FIGURES.items():
            # label, value (and a ratio to the ceiling), separated by runs of spaces
            parts = re.split(r"\s{2,}", line.strip())
            if len(parts) >= 2 and label in parts[0]:
                values[name] = float(parts[1].replace(",", ""))
    return values


def summarise(out: Path, before: str = "before", after: str = "after") -> str:
    rounds: dict[int, dict[str, dict[str, float]]] = {}
    for path in sorted(out.iterdir()):
        match = ROUND_FILE.search(path.name)
        if match and match.group(2) in (before, after):
            values = parse(path)
            if values:
                rounds.setdefault(int(match.group(1)), {})[match.group(2)] = values
    paired = {n: sides for n, sides in rounds.items() if before in sides and after in sides}
    lines = [
        f"{len(paired)} rounds with both sides ({', '.join(map(str, sorted(paired)))})",
        f"| figure | {before} median (range) | {after} median (range) | ratio (median) |",
        "|---|---:|---:|---:|",
    ]
    for name, _ in FIGURES.values():
        pairs = [
            (s[before][name], s[after][name])
            for s in paired.values()
            if name in s[before] and name in s[after]
        ]
        if not pairs:
            continue
        b = [p[0] for p in pairs]
        a = [p[1] for p in pairs]
        ratios = [x / y for y, x in pairs if y]
        ratio = f"{statistics.median(ratios):.2f}" if ratios else "-"
        lines.append(f"| {name} | {cell(b)} | {cell(a)} | {ratio} |")
    return "\n".join(lines)


def cell(values: list[float]) -> str:
    fmt = "{:,.0f}" if max(values) >= 100 else "{:,.1f}"
    med = fmt.format(statistics.median(values))
    return f"{med} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def run(tree: Path, target: Path, e2e_args: list[str]) -> None:
    python = tree / ".venv" / "bin" / "python"
    with target.open("w") as output:
        subprocess.run(
            [str(python), "-m", "bench.e2e", *e2e_args],
            cwd=tree,
            stdout=output,
            stderr=subprocess.STDOUT,
            check=False,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="tree of the build before")
    parser.add_argument("--after", type=Path, help="tree of the build after")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument(
        "--e2e-args",
        default="",
        help='arguments for each bench.e2e run, e.g. "--seconds 30" (a longer steady phase)',
    )
    parser.add_argument("--out", type=Path, required=True, help="directory of the outputs")
    parser.add_argument(
        "--compare",
        default="before,after",
        help="the two sides (file names rN-<side>.txt) to summarise, e.g. before,patched",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.before and args.after:
        first = 1 + max(
            (int(m.group(1)) for p in args.out.iterdir() if (m := ROUND_FILE.search(p.name))),
            default=0,
        )
        sides = [("before", args.before), ("after", args.after)]
        for n in range(first, first + args.rounds):
            for side, tree in sides if n % 2 else reversed(sides):
                print(f"round {n}: {side} ({tree})", flush=True)
                run(tree.resolve(), args.out / f"r{n}-{side}.txt", args.e2e_args.split())
    before, after = args.compare.split(",")
    print(summarise(args.out, before, after))


if __name__ == "__main__":
    main()
