"""A store backed by the ProcessedWebhook model (any Django database; built for PostgreSQL)."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.db import DEFAULT_DB_ALIAS, IntegrityError, transaction
from django.db.models.functions import Now

from homing_receiver.dedup import ClaimResult
from homing_receiver.django.models import ProcessedWebhook

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
