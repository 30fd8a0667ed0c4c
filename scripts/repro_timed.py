"""`dvc repro` with a stage time table: runs `dvc repro [ARGS]`, passes its output through, notes when each stage
starts, and prints how long each took (the gap to the next stage's start, DVC's own hashing included).

    python scripts/repro_timed.py            # the whole pipeline (what `make run` runs)
    python scripts/repro_timed.py -s register

The table is also written to .timings/repro.json (git-ignored), which `make bench` prints, when a stage ran (a
repro with every stage unchanged keeps the last record). `-h` / `--help` prints this and runs nothing. It measures;
it is not a test.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

RUNNING = re.compile(r"^Running stage '([^']+)'")
SKIPPED = re.compile(r"^Stage '([^']+)' didn't change, skipping")
RECORD = Path(".timings/repro.json")


def table(record: dict) -> str:
    """The stage time table of one recorded repro, slowest first, with each stage's share of the total."""
    stages = sorted(record["stages"].items(), key=lambda kv: -kv[1])
    total = record["total_s"]
    lines = [f"dvc repro {' '.join(record['args'])} at {record['started']}: {total:.0f} s in all "
             f"({len(stages)} stages ran, {len(record['skipped'])} unchanged)",
             f"  {'stage':<24} {'seconds':>8} {'share':>6}"]
    lines += [f"  {name:<24} {sec:8.1f} {sec / total:6.0%}" for name, sec in stages]
    return "\n".join(lines)


def main(args: list[str]) -> int:
    if {"-h", "--help"} & set(args):
        print(__doc__)
        return 0
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    t0 = time.perf_counter()
    marks: list[tuple[str, float]] = []
    skipped: list[str] = []
    with subprocess.Popen([sys.executable, "-m", "dvc", "repro", *args], stdout=subprocess.PIPE, text=True,
                          bufsize=1) as proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            if m := RUNNING.match(line):
                marks.append((m.group(1), time.perf_counter()))
            elif m := SKIPPED.match(line):
                skipped.append(m.group(1))
    end = time.perf_counter()
    ends = [t for _, t in marks[1:]] + [end]
    record = {"args": args, "started": started, "returncode": proc.returncode, "total_s": round(end - t0, 1),
              "stages": {name: round(stop - start, 1) for (name, start), stop in zip(marks, ends)},
              "skipped": skipped}
    if marks:
        RECORD.parent.mkdir(exist_ok=True)
        RECORD.write_text(json.dumps(record, indent=2) + "\n")
        print(table(record))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
