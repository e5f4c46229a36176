"""A store backed by the ProcessedWebhook model (any Django database; built for PostgreSQL)."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.db import DEFAULT_DB_ALIAS, IntegrityError, transaction
from django.db.models.functions import Now

from homing_receiver.dedup import ClaimResult
from homing_receiver.django.models import ProcessedWebhook, SeenSequence, SequenceMark

_KEY_MAX = 255
# A row can be deleted (released) or taken over between our failed INSERT and the
# UPDATE/SELECT that follow; each lost round means another caller moved it on.
_CLAIM_ATTEMPTS = 5


def _db_key(key: str) -> str:
    # Event ids are sender-chosen; hash the rare overlong one to fit the column.
    if len(key) <= _KEY_MAX:
        return key
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


class DjangoStore:
    """Claims are rows of ProcessedWebhook.

    * claim: INSERT in a savepoint, relying on the unique key; on IntegrityError take
      over an expired row with ``UPDATE ... WHERE key = %s AND expires_at <= now()``
      (PostgreSQL re-checks the WHERE after a concurrent update, so one caller wins);
      otherwise report the live row's state.
    * complete / release: conditional UPDATE / DELETE on (key, owner).

    * sequence_see / sequence_reset: in one transaction, lock the endpoint's
      SequenceMark row (``SELECT ... FOR UPDATE``; created on first use), store the
      sequence if it is above the mark, advance the mark over the stored sequences that
      follow it and delete those. Calls for one endpoint take turns on the row lock.

    Times come from the database clock (``Now()``) so that servers with skewed clocks
    agree on when a lease ends. Every call commits on its own unless the caller wraps
    it in a transaction (e.g. ATOMIC_REQUESTS): then other workers do not see the
    claim until that transaction commits, and wait on the unique index meanwhile.
    """

    def __init__(self, using: str = DEFAULT_DB_ALIAS) -> None:
        self.using = using

    def claim(self, key: str, owner: str, lease: float) -> ClaimResult:
        key = _db_key(key)
        rows = ProcessedWebhook.objects.using(self.using)
        expires_at = Now() + timedelta(seconds=lease)
        for _ in range(_CLAIM_ATTEMPTS):
            try:
                # The savepoint keeps an outer transaction usable after IntegrityError.
                with transaction.atomic(using=self.using):
                    rows.create(
                        key=key,
                        state=ProcessedWebhook.State.IN_PROGRESS,
                        owner=owner,
                        expires_at=expires_at,
                    )
                return "claimed"
            except IntegrityError:
                pass

            taken = rows.filter(key=key, expires_at__lte=Now()).update(
                state=ProcessedWebhook.State.IN_PROGRESS,
                owner=owner,
                expires_at=expires_at,
            )
            if taken == 1:
                return "claimed"

            state = (
                rows.filter(key=key, expires_at__gt=Now()).values_list("state", flat=True).first()
            )
            if state is not None:
                return "done" if state == ProcessedWebhook.State.DONE else "in_progress"
            # Deleted or expired since the UPDATE: go round again.
        return "in_progress"

    def complete(self, key: str, owner: str, ttl: float) -> bool:
        key = _db_key(key)
        rows = ProcessedWebhook.objects.using(self.using)
        done = {
            "state": ProcessedWebhook.State.DONE,
            "expires_at": Now() + timedelta(seconds=ttl),
        }
        if rows.filter(key=key, owner=owner).update(**done) == 1:
            return True
        # Our lapsed claim was taken over and the new owner finished or failed: if the
        # row is gone or expired, our handler's run is the one to record.
        if rows.filter(key=key, expires_at__lte=Now()).update(owner=owner, **done) == 1:
            return True
        try:
            with transaction.atomic(using=self.using):
                rows.create(key=key, owner=owner, **done)
            return True
        except IntegrityError:
            return False

    def release(self, key: str, owner: str) -> None:
        ProcessedWebhook.objects.using(self.using).filter(
            key=_db_key(key), owner=owner, state=ProcessedWebhook.State.IN_PROGRESS
        ).delete()

    def delete_expired(self) -> int:
        """Delete rows past their expiry (run it from a periodic job); return how many."""
        deleted, _ = (
            ProcessedWebhook.objects.using(self.using).filter(expires_at__lte=Now()).delete()
        )
        return deleted

    def sequence_see(self, endpoint_id: str, sequence: int) -> None:
        endpoint_id = _db_key(endpoint_id)
        with transaction.atomic(using=self.using):
            mark = self._locked_mark(endpoint_id)
            if sequence <= mark.last_contiguous:
                return
            if sequence > mark.last_contiguous + 1:
                SeenSequence.objects.using(self.using).bulk_create(
                    [SeenSequence(endpoint_id=endpoint_id, sequence=sequence)],
                    ignore_conflicts=True,
                )
                return
            self._advance(mark, sequence)

    def sequence_state(self, endpoint_id: str) -> tuple[int, list[int]]:
        endpoint_id = _db_key(endpoint_id)
        # The lock makes the two reads one moment: no see() moves the mark in between.
        with transaction.atomic(using=self.using):
            mark = (
                SequenceMark.objects.using(self.using)
                .select_for_update()
                .filter(endpoint_id=endpoint_id)
                .values_list("last_contiguous", flat=True)
                .first()
            )
            if mark is None:
                return 0, []
            seen = SeenSequence.objects.using(self.using).filter(
                endpoint_id=endpoint_id, sequence__gt=mark
            )
            return mark, list(seen.order_by("sequence").values_list("sequence", flat=True))

    def sequence_reset(self, endpoint_id: str, to: int) -> None:
        endpoint_id = _db_key(endpoint_id)
        with transaction.atomic(using=self.using):
            self._advance(self._locked_mark(endpoint_id), to)

    def _locked_mark(self, endpoint_id: str) -> SequenceMark:
        marks = SequenceMark.objects.using(self.using)
        mark = marks.select_for_update().filter(endpoint_id=endpoint_id).first()
        if mark is None:
            # Of concurrent first calls one INSERT wins; the others wait on its lock.
            marks.bulk_create([SequenceMark(endpoint_id=endpoint_id)], ignore_conflicts=True)
            mark = marks.select_for_update().get(endpoint_id=endpoint_id)
        return mark

    def _advance(self, mark: SequenceMark, to: int) -> None:
        """Move the locked *mark* to *to*, then over the stored sequences that follow."""
        seen = SeenSequence.objects.using(self.using).filter(endpoint_id=mark.endpoint_id)
        following = (
            seen.filter(sequence__gt=to).order_by("sequence").values_list("sequence", flat=True)
        )
        # Stops at the first hole, so it reads at most one chunk past it.
        for sequence in following.iterator(chunk_size=1000):
            if sequence != to + 1:
                break
            to = sequence
        seen.filter(sequence__lte=to).delete()
        mark.last_contiguous = to
        mark.save(update_fields=["last_contiguous"])
