from __future__ import annotations

from django.db import models


class Counter(models.Model):
    """A metrics counter, used only when there is no Redis (the embedded set-up)."""

    name = models.CharField(max_length=100, unique=True)
    value = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name}={self.value}"
