"""Trajectory library: build, size, queries, iteration and append, next to plain reads.

The source is `benchmarks/export.py`'s: by default 5,000 generated runs of 20
situations (100,000 situations), written to a temporary folder, 90% of the runs in one
campaign folder and 10% in another. Each phase runs in its own fresh process, so its
peak resident memory is its own:

- build the library from both campaigns (this is also the full rebuild append is
  compared with), and its size against the source's;
- build from the first campaign only, then append the second (10% new data);
- `metadata()` p50 over repeated calls, for a selective query (one task, best verified)
  and a broad one (every successful trajectory of a scenario);
- the same records written whole to one plain JSONL file (`write_canonical`: the
  sources parsed, nothing indexed), the baseline of the build's rate and the library's
  size;
- a plain JSON read of that file (every line through `json.loads`), then
  `iter_examples` over all of them in each view (three times each, interleaved, the
  fastest kept); the consumer must iterate at least at half the plain read's record rate.

    .venv/bin/python -m benchmarks.library [--runs 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.export import _isolated, _memory_folder, _peak_rss_mb, generate

NEW_SHARE = 0.1
REPEATS = 50
READ_REPEATS = 3


def _folder_mb(folder: str) -> float:
    return sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file()) / 1e6


def build(sources: str, output: str) -> dict[str, float]:
    """Build a library from the comma-separated sources, in a fresh process."""
    from gencoach.library.build import build_library

    start_rss = _peak_rss_mb()
    started = time.perf_counter()
    result = build_library([Path(s) for s in sources.split(",")], Path(output), "bench")
    if result.skipped:
        raise RuntimeError(f"generated sources were skipped: {result.skipped[:3]}")
    return {
        "seconds": time.perf_counter() - started,
        "rows": result.counts["trajectories"],
        "start_rss": start_rss,
        "peak_rss": _peak_rss_mb(),
    }


def append(base: str, source: str, output: str) -> dict[str, float]:
    """Append one campaign to a library, in a fresh process."""
    from gencoach.library.build import append_library

    start_rss = _peak_rss_mb()
    started = time.perf_counter()
    result = append_library(Path(base), [Path(source)], Path(output), "bench-2")
    return {
        "seconds": time.perf_counter() - started,
        "rows": result.accepted,
        "start_rss": start_rss,
        "peak_rss": _peak_rss_mb(),
    }


def queries(library: str) -> dict[str, float]:
    """p50 of `metadata()` for a selective and a broad query."""
    from gencoach.library import CanonicalDatasetAdapter, DatasetQuery

    with CanonicalDatasetAdapter(library) as lib:
        task = lib.select(DatasetQuery(targets="t7"))[0].task_key
        selective = DatasetQuery(task_keys=task, selection="best")
        broad = DatasetQuery(scenarios="bench", selection="successful")
        timings: dict[str, list[float]] = {"selective": [], "broad": []}
        rows = {}
        for name, query in (("selective", selective), ("broad", broad)):
            for _ in range(REPEATS if name == "selective" else 5):
                started = time.perf_counter()
                rows[name] = len(lib.select(query))
                timings[name].append(time.perf_counter() - started)
    return {
        "selective_ms": statistics.median(timings["selective"]) * 1000,
        "selective_rows": rows["selective"],
        "broad_ms": statistics.median(timings["broad"]) * 1000,
        "broad_rows": rows["broad"],
    }


def canonical(sources: str, output: str) -> dict[str, float]:
    """The same records written whole to one JSONL file (`gencoach library canonical`):
    the plain file the reads are compared with, and the source parsing a build pays."""
    from gencoach.library.build import write_canonical

    start_rss = _peak_rss_mb()
    started = time.perf_counter()
    result = write_canonical([Path(s) for s in sources.split(",")], Path(output))
    return {
        "seconds": time.perf_counter() - started,
        "rows": result.accepted,
        "start_rss": start_rss,
        "peak_rss": _peak_rss_mb(),
    }


def plain(records_file: str) -> dict[str, float]:
    """`json.loads` of every line of a plain JSONL file of the records: the floor of any
    reader."""
    start_rss = _peak_rss_mb()
    started = time.perf_counter()
    records = 0
    with open(records_file, "rb") as handle:
        for line in handle:
            json.loads(line)
            records += 1
    return {
        "seconds": time.perf_counter() - started,
        "rows": records,
        "examples": records,
        "start_rss": start_rss,
        "peak_rss": _peak_rss_mb(),
    }


def iterate(library: str, view: str) -> dict[str, float]:
    """Every record of the library as examples of `view`, through the adapter."""
    from gencoach.library import CanonicalDatasetAdapter

    start_rss = _peak_rss_mb()
    with CanonicalDatasetAdapter(library) as lib:
        started = time.perf_counter()
        rows = lib.select()
        examples = sum(1 for _ in lib.examples_of(rows, view))
        seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "rows": len(rows),
        "examples": examples,
        "start_rss": start_rss,
        "peak_rss": _peak_rss_mb(),
    }


def main() -> None:
    """Generate the source, measure each phase, print the tables and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5000, help="runs (20 situations each)")
    parser.add_argument("--tmp-dir", default=_memory_folder(), help="default: /dev/shm if any")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gencoach-bench-library-", dir=args.tmp_dir) as tmp:
        old, new = os.path.join(tmp, "campaign-1"), os.path.join(tmp, "campaign-2")
        situations = generate(Path(tmp) / "all", args.runs)
        runs = sorted(os.listdir(os.path.join(tmp, "all")))
        cut = len(runs) - int(len(runs) * NEW_SHARE)
        os.makedirs(old)
        os.makedirs(new)
        for index, name in enumerate(runs):
            os.rename(
                os.path.join(tmp, "all", name), os.path.join(old if index < cut else new, name)
            )
        source_mb = _folder_mb(old) + _folder_mb(new)
        print(f"source: {situations:,} situations in {len(runs):,} saves, {source_mb:,.0f} MB; "
              f"{len(runs) - cut} saves ({NEW_SHARE:.0%}) held back for the append")  # fmt: skip
        full, base, grown = (os.path.join(tmp, name) for name in ("full", "base", "grown"))
        records_file = os.path.join(tmp, "records.jsonl")
        written = _isolated(canonical, f"{old},{new}", records_file)
        rebuild = _isolated(build, f"{old},{new}", full)
        _isolated(build, old, base)
        appended = _isolated(append, base, new, grown)
        library_mb = _folder_mb(full)
        print(f"\n{'phase':<24}{'seconds':>9}{'rows':>10}{'rows/s':>10}{'peak RSS MB':>13}"
              f"{'growth MB':>11}")  # fmt: skip
        phases_run = (("plain JSONL write", written), ("build (full rebuild)", rebuild),
                      ("append 10%", appended))  # fmt: skip
        for name, result in phases_run:
            print(f"{name:<24}{result['seconds']:>9.1f}{int(result['rows']):>10,}"
                  f"{result['rows'] / result['seconds']:>10,.0f}{result['peak_rss']:>13.0f}"
                  f"{result['peak_rss'] - result['start_rss']:>11.0f}")  # fmt: skip
        print(f"append / full rebuild time: {appended['seconds'] / rebuild['seconds']:.2f}")
        print(f"build rate / plain JSONL write rate: {written['seconds'] / rebuild['seconds']:.2f}")
        plain_mb = os.path.getsize(records_file) / 1e6
        print(f"library {library_mb:,.0f} MB = {library_mb / source_mb:.2f} × source; "
              f"the plain JSONL of the same records {plain_mb:,.0f} MB = "
              f"{plain_mb / source_mb:.2f} × source")  # fmt: skip
        timing = _isolated(queries, full)
        print(f"metadata() p50: selective {timing['selective_ms']:.2f} ms "
              f"({int(timing['selective_rows'])} rows), broad {timing['broad_ms']:.0f} ms "
              f"({int(timing['broad_rows']):,} rows)")  # fmt: skip
        # Reads are short and the machine is shared: each runs three times, interleaved,
        # and the fastest of each is kept.
        phases = {
            "plain JSON read": (plain, records_file),
            "full_trajectory": (iterate, full, "full_trajectory"),
            "assistant_turn": (iterate, full, "assistant_turn"),
        }
        reads: dict[str, dict[str, float]] = {}
        for _ in range(READ_REPEATS):
            for name, (function, *arguments) in phases.items():
                result = _isolated(function, *arguments)
                if name not in reads or result["seconds"] < reads[name]["seconds"]:
                    reads[name] = result
        print(f"\n{'read':<18}{'seconds':>9}{'records':>10}{'records/s':>11}{'examples/s':>12}"
              f"{'peak RSS MB':>13}{'rate ×plain':>13}")  # fmt: skip
        floor = reads["plain JSON read"]["rows"] / reads["plain JSON read"]["seconds"]
        for name, result in reads.items():
            rate = result["rows"] / result["seconds"]
            print(f"{name:<18}{result['seconds']:>9.2f}{int(result['rows']):>10,}{rate:>11,.0f}"
                  f"{result['examples'] / result['seconds']:>12,.0f}{result['peak_rss']:>13.0f}"
                  f"{rate / floor:>13.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
