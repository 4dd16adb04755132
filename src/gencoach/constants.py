"""Every Redis key, stream and queue name gencoach uses, built from one prefix."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PREFIX = "gencoach"

# RQ queue names are global to a Redis database (RQ prefixes them with "rq:queue:").
QUEUE_DIAGNOSIS = "gencoach-diagnosis"
QUEUE_REPAIR = "gencoach-repair"
# A list the enqueuing side pushes a token to, so idle workers wake at once (see
# gencoach.rq_adapter); global like the queues.
QUEUE_DOORBELL = "rq:gencoach:doorbell"

# The consumer group through which controllers share the event stream.
CONTROLLER_GROUP = "controllers"

# The one field of an events-stream entry (the event's JSON) and of a branch-order entry.
EVENT_FIELD = "event"
ORDER_FIELD = "order"
# The field of a branch-stream entry that answers a settle probe (a RunSettled's JSON).
SETTLED_FIELD = "settled"
TEACHER_STATE_MAX_BYTES = 65536
"""The largest teacher state one situation may keep (bytes of JSON)."""
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
    def gaps(self) -> str:
        """Sorted set of runs whose events wait for a missing seq
        (gencoach.service.store.sequencing): run id scored by when the wait times out
        (Redis time, s)."""
        return f"{self.prefix}:gaps"

    def lease(self, consumer: str) -> str:
        """A live controller's lease, renewed while it runs (gencoach.service.leases); its
        stream consumer is taken for dead once the key has expired."""
        return f"{self.prefix}:controller:{consumer}"

    @property
    def write_probe(self) -> str:
        """A short-lived key the controller writes to learn whether Redis takes writes."""
        return f"{self.prefix}:write-probe"

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

    def follow_up(self, run_id: str, request_id: str, attempt: int) -> str:
        """List holding the repair job of a request's attempt, handed to the worker that
        ran its diagnosis (`gencoach.followups`); `<key>:waiting` marks that worker waiting."""
        return self.run(run_id, f"followup:{request_id}:{attempt}")

    def reinjecting(self, run_id: str, request_id: str) -> str:
        """Which controller reinjects a request now (its consumer name, with an expiry), so
        that no two controllers ask the agent for the same branch at once."""
        return self.run(run_id, f"reinjecting:{request_id}")

    def branches(self, run_id: str) -> str:
        """Stream of branch orders for one run's generator (in the run's hash slot)."""
        return self.run(run_id, "branches")

    def requests(self, run_id: str) -> str:
        """Hash of a run's coaching requests: request id -> JSON record."""
        return self.run(run_id, "requests")

    def settle(self, run_id: str) -> str:
        """Hash of a run's settle probe: `asked` (the generator's last seq when it asked),
        `expected` (JSON list of the terminals it reported since its last answer) and
        `answered` (the `asked` the last `run.settled` answered); see gencoach.settling."""
        return self.run(run_id, "settle")

    def routed(self, run_id: str) -> str:
        """Set of a run's terminals (`<candidate_id>:created|executed`) gencoach has routed."""
        return self.run(run_id, "routed")

    def generator_state(self, run_id: str) -> str:
        """Hash a generator keeps to resume the run after a restart: `next_seq` (written with
        each batch of events) and the fields it remembers (`AsyncReporter.remember`)."""
        return self.run(run_id, "generator")

    def teacher_state(self, run_id: str) -> str:
        """Hash of a run's privileged teacher states: input id -> JSON (docs/backends.md).

        Written by the generator (`Reporter.save_teacher_state`); the worker hands the
        states of a job's steps to `type: python` backends in their context.
        """
        return self.run(run_id, "teacher_state")

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
    def request_deadlines(self) -> str:
        """Sorted set of the requests not yet ended, each scored with when reconciliation
        looks at it next (ms since the epoch): a pass reads only those due."""
        return f"{self.prefix}:requests:deadlines"

    @property
    def heard(self) -> str:
        """Sorted set of the active runs, each scored by when it last heard from its
        generator (ms since the epoch): a pass reads only the runs fallen silent
        (gencoach.service.store.watches)."""
        return f"{self.prefix}:heard"

    @property
    def registrations(self) -> str:
        """Sorted set of the runs whose agent's registration has not ended, each scored by
        when reconciliation looks at it (ms since the epoch)."""
        return f"{self.prefix}:registrations"

    @property
    def budgets(self) -> str:
        """Hash of coaching budgets changed over HTTP, applied over the config file's."""
        return f"{self.prefix}:budgets"

    def runs_index(self, part: str) -> str:
        """One key of the runs index (see gencoach.service.store.runindex).

        The parts are `entries`, `combinations`, `counts`, `expiries` and, per
        combination of state, scenario and agent, `by:<JSON of the three>`. The hash tag
        `{index}` keeps them in one Redis Cluster slot, for the index's scripts.
        """
        return f"{self.prefix}:runs:{{index}}:{part}"

    @property
    def metrics(self) -> str:
        """Hash of every process's counters and histogram buckets (see gencoach.metrics)."""
        return f"{self.prefix}:metrics"

    def backend_slots(self, backend: str) -> str:
        """Sorted set of one LLM backend's concurrency leases: holder id scored by expiry (ms).

        Shared by every worker process; a lease whose holder died lapses at its expiry.
        """
        return f"{self.prefix}:backend:{backend}:slots"

    def backend_structured_output(self, backend: str) -> str:
        """Hash of the structured-output mode that worked per endpoint and model of a backend
        whose setting is `auto`: `<endpoint> <model>` -> json_schema | json_object | none."""
        return f"{self.prefix}:backend:{backend}:structured_output"
