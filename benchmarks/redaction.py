"""How redacting a log field scales with its length, next to a plain copy of it.

A field of n characters of one letter (the shape that made the old URL-password pattern
quadratic) is redacted at 10,000 and at 10 times that; the ratio of the two times is 10
for a linear redaction and 100 for a quadratic one. The baseline, in the same run, is
`str.lower` over the same text (one linear pass). The capped path (what a log event
runs: cut to 4 kB first) is timed on a 10 MB field.

    .venv/bin/python -m benchmarks.redaction [--repeat 20]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from gencoach.runtime.logs import cap, redact

SHORT, LONG = 10_000, 100_000


def _best(call: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    """Print the times and their ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    repeat = parser.parse_args().repeat
    rows = []
    for name, work in (("str.lower (baseline)", str.lower), ("redact", redact)):
        short = _best(lambda: work("x" * SHORT), repeat)  # noqa: B023 - timed at once
        long = _best(lambda: work("x" * LONG), repeat)  # noqa: B023 - timed at once
        rows.append((name, short, long))
    for name, short, long in rows:
        print(
            f"{name:22} {SHORT:,}: {short * 1e3:8.3f} ms  {LONG:,}: {long * 1e3:8.3f} ms  "
            f"ratio {long / short:5.1f}"
        )
    huge = "x" * 10_000_000
    capped = _best(lambda: redact(cap(huge)), repeat)
    print(f"redact(cap(10 MB)):    {capped * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
