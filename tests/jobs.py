"""Background work a test does in its own thread, instead of starting the process that
would do it (the scheduler runs replay jobs in production)."""

from __future__ import annotations

from dlq.models import ReplayJob
from dlq.services.replay_jobs import replay_job_run


def run_replay_jobs() -> None:
    """Run every running replay job to its end, as the scheduler's loop would."""
    for job_id in ReplayJob.objects.filter(status="running").values_list("pk", flat=True):
        replay_job_run(job_id=job_id)
