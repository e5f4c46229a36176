"""Background work a test does in its own thread, instead of starting the process that
would do it (the scheduler runs replay jobs in production)."""

from __future__ import annotations

import threading

from django.db import connection

from dlq.models import DeadLetter, ReplayJob
from dlq.services.replay import NotReplayable, dead_letter_replay
from dlq.services.replay_jobs import replay_job_run


def run_replay_jobs() -> None:
    """Run every running replay job to its end, as the scheduler's loop would."""
    for job_id in ReplayJob.objects.filter(status="running").values_list("pk", flat=True):
        replay_job_run(job_id=job_id)


def replays_at_once(letter: DeadLetter, *, staff: int = 2) -> list[str]:
    """`staff` replays of one letter, each in its own thread and connection, released
    together: each says "replayed" or "refused", sorted."""
    start, outcomes = threading.Barrier(staff), []

    def replay() -> None:
        copy = DeadLetter.objects.select_related("endpoint").get(pk=letter.pk)
        start.wait()
        try:
            dead_letter_replay(dead_letter=copy)
            outcomes.append("replayed")
        except NotReplayable:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=replay) for _ in range(staff)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(outcomes)
