"""How one series is named in the Redis hash: its sample name and label values, as JSON.

`field` writes a series' hash field (`["gencoach_jobs_total", ["repair", "done"]]`) and
`parse_field` reads one back; `bound` gives a histogram bucket's `le` label value.
"""

from __future__ import annotations

import json

from prometheus_client.utils import floatToGoString

Series = tuple[str, tuple[str, ...]]
# A histogram's observations are stored per bucket they fall in (`<name>_in`, its last label
# value the bucket's upper bound `le`, as Prometheus writes it), so an observation costs three
# fields, not one per bucket; the exposition makes them cumulative. Fields `<name>_bucket`
# (cumulative, as versions before stored them) are still read and added.
IN_BUCKET = "_in"


def field(name: str, labels: tuple[str, ...]) -> str:
    """The hash field of one series."""
    return json.dumps([name, list(labels)], separators=(",", ":"), ensure_ascii=False)


def parse_field(raw: bytes | str) -> Series | None:
    """The series a hash field names, or None for a field this version does not write."""
    try:
        name, labels = json.loads(raw)
    except (ValueError, TypeError):
        return None
    if not isinstance(name, str) or not isinstance(labels, list):
        return None
    return name, tuple(str(value) for value in labels)


def bound(upper: float) -> str:
    """A bucket's `le` label value."""
    text: str = floatToGoString(upper)  # type: ignore[no-untyped-call]
    return text
