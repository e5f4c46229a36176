"""Celery entry points of the dead-letter queue: take ids, call one service."""

from __future__ import annotations

from celery import shared_task

from dlq.services.replay_jobs import RUN_TASK, replay_job_run


@shared_task(name=RUN_TASK, ignore_result=True)
def replay_job_task(job_id: str) -> None:
    # acks_late + reject_on_worker_lost (settings): a worker that dies mid-job gets the
    # message redelivered, and the job resumes from its cursor.
    replay_job_run(job_id=job_id)
