"""Scraping a controller's `/metrics` and reading its samples by name and labels."""

from __future__ import annotations

from collections.abc import Mapping

import httpx
from prometheus_client.parser import text_string_to_metric_families

Labels = frozenset[tuple[str, str]]


class Samples(dict[tuple[str, Labels], float]):
    """One scrape's samples: `(sample name, labels) -> value`."""

    def value(self, name: str, **labels: str) -> float:
        """The sample with exactly these labels, 0 when absent (a counter not yet counted)."""
        return self.get((name, frozenset(labels.items())), 0.0)

    def total(self, name: str, **labels: str) -> float:
        """The sum of the samples of `name` whose labels include these."""
        wanted = set(labels.items())
        return sum(v for (n, found), v in self.items() if n == name and wanted <= found)

    def by(self, name: str, label: str, **labels: str) -> Mapping[str, float]:
        """The samples of `name` (matching `labels`) summed by one label's values."""
        wanted = set(labels.items())
        summed: dict[str, float] = {}
        for (n, found), value in self.items():
            if n == name and wanted <= found:
                key = dict(found)[label]
                summed[key] = summed.get(key, 0.0) + value
        return summed


def parse(text: str) -> Samples:
    """The samples of a Prometheus text exposition."""
    samples = Samples()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name, frozenset(sample.labels.items())] = sample.value
    return samples


def scrape(url: str) -> Samples:
    """GET `url`/metrics and parse it (fails on any status but 200)."""
    response = httpx.get(f"{url}/metrics", timeout=10.0)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(response.text)
