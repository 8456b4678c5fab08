"""BENCHMARKS.md from its narrative (bench/BENCHMARKS.in.md) and the two runs' outputs: `{{bench}}` is replaced by
results/bench.md (make bench), `{{scale}}` by results/scale.md (make scale), each with its headings moved one level
down. `make benchmarks` runs it after both; the narrative quotes figures of the runs it was written for, so read
the tables first when they change.

Usage: .venv/bin/python bench/report.py
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def demoted(path):
    """The file's text without its title line, every other heading one level deeper."""
    lines = path.read_text().splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return "\n".join("#" + line if re.match(r"#{1,5} ", line) else line for line in lines).strip() + "\n"


def main():
    parts = {}
    for key in ("bench", "scale"):
        path = ROOT / "results" / f"{key}.md"
        if not path.exists():
            sys.exit(f"{path.relative_to(ROOT)} is missing: run make {key} first")
        parts[key] = demoted(path)
    text = (ROOT / "bench" / "BENCHMARKS.in.md").read_text()
    for key, body in parts.items():
        text = text.replace("{{" + key + "}}", body.rstrip("\n"))
    (ROOT / "BENCHMARKS.md").write_text(text)
    print("wrote BENCHMARKS.md")


if __name__ == "__main__":
    main()
