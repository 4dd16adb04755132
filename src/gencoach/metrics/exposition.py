"""The Prometheus text a scrape returns: the stored counters, then what is measured live.

`Gauge` values are measured by the caller at scrape time (queue depths, runs, loop
lag); the counters and histograms come from the Redis hash every process adds to.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import redis.asyncio
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from gencoach.metrics.catalog import FAMILIES, Counter, Histogram
from gencoach.metrics.series import IN_BUCKET, Series, bound, parse_field

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class Gauge:
    """A value measured now, with one sample per label-value tuple."""

    name: str
    help: str
    labels: tuple[str, ...] = ()
    samples: dict[tuple[str, ...], float] = field(default_factory=dict)


async def stored(client: redis.asyncio.Redis, key: str) -> dict[Series, float]:
    """Every series in the metrics hash with its value."""
    raw = await client.hgetall(key)
    found: dict[Series, float] = {}
    for name, value in raw.items():
        series = parse_field(name)
        if series is not None:
            found[series] = float(value)
    return found


class _Snapshot(Collector):
    def __init__(self, series: dict[Series, float], gauges: Iterable[Gauge]) -> None:
        self.by_name: defaultdict[str, list[tuple[tuple[str, ...], float]]] = defaultdict(list)
        for (name, labels), value in sorted(series.items()):
            self.by_name[name].append((labels, value))
        self.gauges = tuple(gauges)

    def collect(self) -> Iterator[Metric]:
        for family in FAMILIES:
            if isinstance(family, Counter):
                yield self._counter(family)
            else:
                yield self._histogram(family)
        for gauge in self.gauges:
            metric = GaugeMetricFamily(gauge.name, gauge.help, labels=gauge.labels)
            for labels, value in sorted(gauge.samples.items()):
                metric.add_metric(labels, value)
            yield metric

    def _counter(self, counter: Counter) -> Metric:
        metric = CounterMetricFamily(
            counter.name.removesuffix("_total"), counter.help, labels=counter.labels
        )
        for labels, value in self.by_name[counter.name]:
            if len(labels) == len(counter.labels):
                metric.add_metric(labels, value)
        return metric

    def _histogram(self, histogram: Histogram) -> Metric:
        counts: defaultdict[tuple[str, ...], dict[str, float]] = defaultdict(dict)
        sums: dict[tuple[str, ...], float] = {}
        width = len(histogram.labels)
        bounds = [*(bound(upper) for upper in histogram.buckets), "+Inf"]
        # Observations per bucket they fell in, made cumulative.
        for labels, value in self.by_name[f"{histogram.name}{IN_BUCKET}"]:
            if len(labels) == width + 1 and labels[width] in bounds:
                found = counts[labels[:width]]
                for upper in bounds[bounds.index(labels[width]) :]:
                    found[upper] = found.get(upper, 0.0) + value
        for labels, value in self.by_name[f"{histogram.name}_sum"]:
            if len(labels) == width:
                sums[labels] = value
        metric = HistogramMetricFamily(histogram.name, histogram.help, labels=histogram.labels)
        for labels in sorted(counts):
            found = counts[labels]
            buckets = [(upper, found.get(upper, 0.0)) for upper in bounds]
            metric.add_metric(list(labels), buckets, sum_value=sums.get(labels, 0.0))
        return metric


def render(series: dict[Series, float], gauges: Iterable[Gauge] = ()) -> bytes:
    """The Prometheus text exposition of the stored series and the live gauges."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(series, gauges))
    return generate_latest(registry)
