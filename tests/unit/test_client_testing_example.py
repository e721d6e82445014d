"""The example of client/README.md's "Testing code that uses the client" runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).parents[2] / "client" / "README.md"


def test_the_readme_example_of_the_fake_runs() -> None:
    section = README.read_text().split("## Testing code that uses the client", 1)[1]
    [example] = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)

    ran = subprocess.run(
        [sys.executable, "-c", example], capture_output=True, text=True, timeout=60, check=False
    )

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "refused: down\n"
