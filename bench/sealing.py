"""What sealing payloads at rest costs (issue 44): CreateJob and GetJob (and LockJob and
SubmitResult, which open and seal too), one call at a time, on two stacks side by side —
one without a KEK (payloads stored as they are), one with ``JOBS_DATA_KEK`` — their rounds
alternating (``bench.growth``'s rounds and p50s: a drift of a shared machine's speed moves
both sides alike). The figure is p50 sealed / p50 plain of CreateJob + GetJob (target: at
most 1.10). Every run of it is one round; repeat it for several.

    python -m bench.sealing --samples 300
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import sys
import tempfile
from pathlib import Path

import uvloop

from bench.e2e import Stack
from bench.growth import OPS, connected, p50s


class SealingStack(Stack):
    """A stack whose job service seals payloads under a KEK of its own."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.kek = base64.urlsafe_b64encode(os.urandom(32)).decode()

    def _env(self) -> dict[str, str]:
        if os.environ.get("BENCH_SEALING_CONTROL"):  # an A/A run: both sides plain
            return super()._env()
        return {**super()._env(), "JOBS_DATA_KEK": self.kek}


async def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="jobs-bench-sealing-"))
    stacks = [Stack(root / "plain"), SealingStack(root / "sealed")]
    try:
        for stack in stacks:
            stack.root.mkdir()
            await stack.start()
        async with connected(stacks[0]) as (_, plain), connected(stacks[1]) as (db, sealed):
            p50_plain, p50_sealed = await p50s(plain, sealed, args.samples)
            keys = await db.fetchval("SELECT count(*) FROM user_data_keys")
    except BaseException:
        for stack in stacks:
            stack.stop()
        print(f"failed; the processes' logs are in {root}", file=sys.stderr)
        raise
    for stack in stacks:
        stack.stop()
    shutil.rmtree(root, ignore_errors=True)
    print(f"Sealing at rest: p50 of {args.samples} calls each, one at a time, rounds alternating")
    print(f"(the sealed stack holds {keys} users' data keys)")
    print(f"{'call':<16}{'plain ms':>10}{'sealed ms':>11}{'sealed/plain':>14}")
    for op in OPS:
        print(
            f"{op:<16}{p50_plain[op]:>10.2f}{p50_sealed[op]:>11.2f}"
            f"{p50_sealed[op] / p50_plain[op]:>14.2f}"
        )
    both_plain = p50_plain["create"] + p50_plain["get"]
    both_sealed = p50_sealed["create"] + p50_sealed["get"]
    print(
        f"{'create + get':<16}{both_plain:>10.2f}{both_sealed:>11.2f}"
        f"{both_sealed / both_plain:>14.2f}"
    )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=300, help="rounds per side")
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(parse()))
