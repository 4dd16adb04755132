"""Taking jobs off the queues: priority order, one atomic step, what counts as waiting,
and what RQ shows of a job."""

from __future__ import annotations

import redis
from rq import Queue, Worker
from rq.intermediate_queue import IntermediateQueue
from rq.job import Job

from gencoach.constants import QUEUE_DIAGNOSIS, QUEUE_DOORBELL, QUEUE_REPAIR
from gencoach.protocol.jobs import DiagnosisJob
from gencoach.rq_adapter import PriorityQueue, enqueue, job_id, waiting
from tests.support.agent_server import ScriptedAgent
from tests.workers.builders import diagnosis_job, repair_job


def queues(client: redis.Redis) -> list[PriorityQueue]:
    """The repair and diagnosis queues, in priority order."""
    return [PriorityQueue(name, connection=client) for name in (QUEUE_REPAIR, QUEUE_DIAGNOSIS)]


def test_the_first_queue_is_served_first_and_a_taken_job_is_held_not_lost(
    redis_client: redis.Redis, scripted_agent: ScriptedAgent
) -> None:
    """A repair job is taken before an older diagnosis job, and sits in RQ's intermediate list."""
    diagnosis = diagnosis_job(request_id="older")
    repair = repair_job(scripted_agent.url, request_id="newer")
    enqueue(redis_client, diagnosis, job_timeout_s=60)
    enqueue(redis_client, repair, job_timeout_s=60)
    assert redis_client.llen(QUEUE_DOORBELL) == 2
    taken = PriorityQueue.dequeue_any(queues(redis_client), None, connection=redis_client)
    assert taken is not None
    job, queue = taken
    assert (job.id, queue.name) == (job_id(repair), QUEUE_REPAIR)
    holding = IntermediateQueue.get_intermediate_queue_key(
        Queue(QUEUE_REPAIR, connection=redis_client).key
    )
    assert redis_client.lrange(holding, 0, -1) == [job.id.encode()]
    second = PriorityQueue.dequeue_any(queues(redis_client), None, connection=redis_client)
    assert second is not None
    assert second[0].id == job_id(diagnosis)
    assert PriorityQueue.dequeue_any(queues(redis_client), None, connection=redis_client) is None


def test_a_take_reads_the_job_with_it_and_drops_one_whose_hash_is_gone(
    redis_client: redis.Redis,
) -> None:
    """One script call takes the job and its hash (nothing read after it); a job whose
    hash expired while it waited is dropped, and the next one is taken in the same call."""
    gone, kept = diagnosis_job(request_id="gone"), diagnosis_job(request_id="kept")
    enqueue(redis_client, gone, job_timeout_s=60)
    enqueue(redis_client, kept, job_timeout_s=60)
    redis_client.delete(Job.key_for(job_id(gone)))
    before = redis_client.info("commandstats")
    taken = PriorityQueue.dequeue_any(queues(redis_client), None, connection=redis_client)
    after = redis_client.info("commandstats")
    assert taken is not None
    job, queue = taken
    assert (job.id, queue.name) == (job_id(kept), QUEUE_DIAGNOSIS)
    (payload,) = job.args
    assert DiagnosisJob.parse_json(payload).request_id == "kept"
    assert Queue(QUEUE_DIAGNOSIS, connection=redis_client).job_ids == []
    holding = IntermediateQueue.get_intermediate_queue_key(queue.key)
    assert redis_client.lrange(holding, 0, -1) == [job.id.encode()]
    called = {
        name: stats["calls"] - before.get(name, {"calls": 0})["calls"]
        for name, stats in after.items()
        if name not in ("cmdstat_info",)
    }
    assert {name for name, calls in called.items() if calls} <= {
        "cmdstat_evalsha", "cmdstat_eval", "cmdstat_lpop", "cmdstat_hgetall", "cmdstat_rpush",
        "cmdstat_script|load", "cmdstat_script",
    }  # fmt: skip
    assert called.get("cmdstat_evalsha", 0) + called.get("cmdstat_eval", 0) == 1


def test_a_job_enqueued_again_is_a_no_op_that_rings_no_bell(redis_client: redis.Redis) -> None:
    """The same request, job and attempt enqueued twice: one job on its queue, RQ's list of
    queues names the queue, and only the first enqueue rang the doorbell."""
    job = diagnosis_job()
    assert enqueue(redis_client, job, job_timeout_s=60) == job_id(job)
    assert enqueue(redis_client, job, job_timeout_s=60) == job_id(job)
    queue = Queue(QUEUE_DIAGNOSIS, connection=redis_client)
    assert queue.job_ids == [job_id(job)]
    assert redis_client.smembers(Queue.redis_queues_keys) == {queue.key.encode()}
    assert redis_client.llen(QUEUE_DOORBELL) == 1


def test_a_job_counts_as_waiting_until_a_worker_starts_it(redis_client: redis.Redis) -> None:
    """Queued: waiting (the controller keeps its lease); started by a worker: no longer."""
    job = diagnosis_job()
    rq_id = enqueue(redis_client, job, job_timeout_s=60)
    assert waiting(redis_client, rq_id)
    taken = PriorityQueue.dequeue_any(queues(redis_client), None, connection=redis_client)
    assert taken is not None
    Worker([QUEUE_DIAGNOSIS], connection=redis_client).prepare_job_execution(taken[0])
    assert not waiting(redis_client, rq_id)
    assert not waiting(redis_client, "no-such-job")


def test_a_job_carries_its_retry_policy_where_rq_shows_it(redis_client: redis.Redis) -> None:
    """`rq info` and rq-dashboard describe a job by its attempt of its `max_attempts`, and
    the payload a worker reads carries both."""
    job = diagnosis_job(attempt=2, max_attempts=4)
    stored = Job.fetch(enqueue(redis_client, job, job_timeout_s=60), connection=redis_client)
    assert stored.description == f"diagnosis {job.request_id} attempt 2 of 4"
    (payload,) = stored.args
    carried = DiagnosisJob.parse_json(payload)
    assert (carried.attempt, carried.max_attempts) == (2, 4)
