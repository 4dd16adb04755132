"""Counters and histograms every gencoach process records, summed in Redis.

The controller and each worker count into a `MetricsRecorder`, which adds its counts to one
Redis hash (`Keys.metrics`) in a pipeline now and then; the controller's `/metrics`
route reads that hash and adds what it measures live (queues, runs, loop lag).
"""

from gencoach.metrics.catalog import FAMILIES, Counter, Family, Histogram
from gencoach.metrics.recorder import MetricsRecorder

__all__ = ["FAMILIES", "Counter", "Family", "Histogram", "MetricsRecorder"]
