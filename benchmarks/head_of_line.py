"""A healthy run's correction behind runs whose agent hangs, next to the same run alone.

A real controller and real RQ workers coach failures with an instant in-process backend
and an instant agent on loopback. The baseline is the time from publishing a failing
execution to the branch order on the run's stream, for a run alone (median of
`--rounds`). Then, `--rounds` times, `--hanging` runs whose agent accepts connections
and never answers each report their failure first, and the healthy run's correction is
timed behind them. Without a `--redis-url` an embedded Redis is used.

    .venv/bin/python -m benchmarks.head_of_line [--hanging 6] [--rounds 3] [--redis-url URL]
"""

from __future__ import annotations

import argparse

import redis

from benchmarks.common import FLUSHED_URL_HELP, bench_redis, p50
from benchmarks.loop import _correction, coaching_loop
from tests.support.coaching import report_known
from tests.support.hanging_agent import HangingAgent


def main(redis_url: str, hanging: int, rounds: int) -> None:
    client = redis.Redis.from_url(redis_url, socket_timeout=180)
    hung = HangingAgent()
    try:
        with coaching_loop(client, redis_url) as agent_url:
            alone = [_correction(client, redis_url, f"alone-{i}", agent_url) for i in range(rounds)]
            behind = []
            for r in range(rounds):
                for h in range(hanging):
                    report_known(redis_url, f"hang-{r}-{h}", hung.url)
                behind.append(_correction(client, redis_url, f"behind-{r}", agent_url, 150.0))
    finally:
        hung.close()
    base = p50(alone)
    print(f"hanging runs: {hanging}, rounds: {rounds}, redis {redis_url}")
    print(f"  healthy run alone (median)   : {base * 1000:9.1f} ms  (baseline)")
    for name, value in [*((f"#{r}", v) for r, v in enumerate(behind)), ("median", p50(behind))]:
        label = f"behind {hanging} hanging runs, {name}"
        print(f"  {label:<29}: {value * 1000:9.1f} ms  ratio {value / base:7.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hanging", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--redis-url", default=None, help=FLUSHED_URL_HELP)
    args = parser.parse_args()
    with bench_redis(args.redis_url) as url:
        main(url, args.hanging, args.rounds)
