"""Every Redis key, stream and queue name gencoach uses, built from one prefix."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PREFIX = "gencoach"

# RQ queue names are global to a Redis database (RQ prefixes them with "rq:queue:").
QUEUE_DIAGNOSIS = "gencoach-diagnosis"
QUEUE_REPAIR = "gencoach-repair"
# A list the enqueuing side pushes a token to, so idle workers wake at once (see
# gencoach.workers.queues); global like the queues.
QUEUE_DOORBELL = "rq:gencoach:doorbell"

# The consumer group through which controllers share the event stream.
CONTROLLER_GROUP = "controllers"

# The one field of an events-stream entry (the event's JSON) and of a branch-order entry.
EVENT_FIELD = "event"
ORDER_FIELD = "order"
# The one field of a results-stream entry: a JobResult's JSON.
RESULT_FIELD = "result"


@dataclass(frozen=True)
class Keys:
    """The key names under one prefix (`redis.key_prefix`, "gencoach" by default)."""

    prefix: str = DEFAULT_PREFIX

    @property
    def events(self) -> str:
        """Stream the generators publish generation events to."""
        return f"{self.prefix}:events"

    @property
    def dead_events(self) -> str:
        """Stream of events intake refused, each with the original payload and the reason."""
        return f"{self.prefix}:events:dead"

    @property
    def terminals(self) -> str:
        """Stream of candidates whose events may open coaching or prove an attempt."""
        return f"{self.prefix}:terminals"

    @property
    def results(self) -> str:
        """Stream through which worker jobs hand their results back to the controller."""
        return f"{self.prefix}:results"

    def run(self, run_id: str, part: str) -> str:
        """One key of a run's graph state.

        The run id is a hash tag (`{run_id}`), so every key of a run lives in one slot of
        a Redis Cluster and one Lua script may touch them all.
        """
        return f"{self.prefix}:run:{{{run_id}}}:{part}"

    def branches(self, run_id: str) -> str:
        """Stream of branch orders for one run's generator (in the run's hash slot)."""
        return self.run(run_id, "branches")

    def sim_states(self, run_id: str) -> str:
        """Hash of the reference simulator's saved situations: input id -> episode state JSON.

        Written by the reference generator, read by its privileged teacher backend.
        """
        return self.run(run_id, "sim_states")

    def stages(self, run_id: str) -> str:
        """Set of the ids of a run's stages that have per-stage coaching limits state."""
        return self.run(run_id, "stages")

    def stage(self, run_id: str, stage_id: int, part: str) -> str:
        """One key of a stage's coaching limits state (in the run's hash slot).

        The parts are `pending` and `human` (leases: ZSET of request id -> expiry ms),
        `completed` and `proven` (SETs of attempt ids) and `attempts` (HASH of completed
        request id -> attempt id).
        """
        return self.run(run_id, f"stage:{stage_id}:{part}")

    @property
    def attempt_counter(self) -> str:
        """Counter of coaching attempt ids (integers in saves), shared by every run."""
        return f"{self.prefix}:attempts"

    @property
    def budgets(self) -> str:
        """Hash of coaching budgets changed over HTTP, applied over the config file's."""
        return f"{self.prefix}:budgets"

    @property
    def runs(self) -> str:
        """Sorted set of known run ids, scored by the time their run started."""
        return f"{self.prefix}:runs"

    @property
    def metrics(self) -> str:
        """Hash of every process's counters and histogram buckets (see gencoach.metrics)."""
        return f"{self.prefix}:metrics"

    def backend_slots(self, backend: str) -> str:
        """Sorted set of one LLM backend's concurrency leases: holder id scored by expiry (ms).

        Shared by every worker process; a lease whose holder died lapses at its expiry.
        """
        return f"{self.prefix}:backend:{backend}:slots"

    def backend_usage(self, backend: str) -> str:
        """Hash of one LLM backend's token usage: prompt/completion/total tokens, requests."""
        return f"{self.prefix}:backend:{backend}:usage"

    def backend_structured_output(self, backend: str) -> str:
        """Hash of the structured-output mode that worked per endpoint and model of a backend
        whose setting is `auto`: `<endpoint> <model>` -> json_schema | json_object | none."""
        return f"{self.prefix}:backend:{backend}:structured_output"
