"""`manage.py create_tenant` refuses a name it cannot store with a clear line, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.processes import process_env
from webhooks.models import Tenant

pytestmark = pytest.mark.e2e  # runs manage.py create_tenant


def create_tenant(name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "create_tenant", name],
        capture_output=True,
        text=True,
        env=process_env(),
        timeout=60,
    )


@pytest.mark.parametrize(
    "name, complaint",
    [("A" * 201, "Must be 1 to 200 characters."), ("Acme\x01Inc", "printable characters only")],
)
def test_a_name_it_cannot_store_exits_2_with_one_clear_line(transactional_db, name, complaint):
    result = create_tenant(name)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert complaint in result.stderr and "name" in result.stderr
    assert result.stdout == ""
    assert not Tenant.objects.exists()


def test_a_name_of_200_characters_is_created(transactional_db):
    result = create_tenant("B" * 200)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("hom_")
    assert Tenant.objects.get().name == "B" * 200
