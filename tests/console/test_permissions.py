"""Console actions need their Django permission (CONTRACT section 7).

Victor is staff with no permission: he sees each page without the control, and a POST
he forges anyway answers 403 and changes no row. Paula holds only the one permission an
action needs, and can do it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Permission, User
from django.db.models import Model
from django.test import Client

from deliveries.models import Delivery
from dlq.models import DeadLetter, ReplayJob
from tests.factories import dead_letter_via_api, endpoint_id_via_api
from webhooks.models import Endpoint, Event


@dataclass(frozen=True)
class Scene:
    letter: DeadLetter
    active_endpoint: str
    inactive_endpoint: str


@dataclass(frozen=True)
class Action:
    name: str
    permission: str  # app_label.codename
    page: str  # where the control is shown, from the scene
    control: str  # the form's action URL, as it appears in the page
    post: str
    data: dict[str, str]


@pytest.fixture
def scene(alice) -> Scene:
    active, inactive = endpoint_id_via_api(alice), endpoint_id_via_api(alice)
    letter = dead_letter_via_api(alice, active)
    Endpoint.objects.filter(pk=inactive).update(is_active=False)
    return Scene(letter=letter, active_endpoint=active, inactive_endpoint=inactive)


def actions(scene: Scene) -> list[Action]:
    letter, active, inactive = scene.letter, scene.active_endpoint, scene.inactive_endpoint
    dlq, dlv, ep = "dlq.change_deadletter", "deliveries.change_delivery", "webhooks.change_endpoint"
    replay, discard = f"/dead-letters/{letter.id}/replay", f"/dead-letters/{letter.id}/discard"
    retry = f"/deliveries/{letter.delivery_id}/retry"
    selected, replay_all = "/dead-letters/selected", "/dead-letters/replay-all"
    at_active, at_inactive = f"/endpoints/{active}/action", f"/endpoints/{inactive}/action"
    save_filter = f"/endpoints/{active}/filter/save"
    return [
        Action("replay", dlq, "/dead-letters/", replay, replay, {}),
        Action("discard", dlq, "/dead-letters/", discard, discard, {}),
        Action(
            "replay selected", dlq, "/dead-letters/", selected, selected,
            {"action": "replay", "ids": letter.id},
        ),
        Action(
            "discard selected", dlq, "/dead-letters/", selected, selected,
            {"action": "discard", "ids": letter.id},
        ),
        Action("replay all", dlq, "/dead-letters/", replay_all, replay_all, {"expected": "1"}),
        Action("retry", dlv, f"/deliveries/{letter.delivery_id}/", retry, retry, {}),
        Action(
            "deactivate", ep, f"/endpoints/{active}/", at_active, at_active,
            {"action": "deactivate"},
        ),
        Action(
            "activate", ep, f"/endpoints/{inactive}/", at_inactive, at_inactive,
            {"action": "activate"},
        ),
        Action(
            "rotate secret", ep, f"/endpoints/{active}/", at_active, at_active,
            {"action": "rotate"},
        ),
        Action("test event", ep, f"/endpoints/{active}/", at_active, at_active, {"action": "test"}),
        Action(
            "save filter", ep, f"/endpoints/{active}/filter", save_filter, save_filter,
            {"filter": '{"type": "order.paid"}'},
        ),
    ]  # fmt: skip


ACTION_NAMES = [a.name for a in actions(Scene(DeadLetter(id="dl"), "ep_a", "ep_b"))]


def everything() -> dict[str, list[dict]]:
    """Every row an action could touch, to show that a refused one touched none."""
    models: tuple[type[Model], ...] = (DeadLetter, Delivery, Endpoint, Event, ReplayJob)
    return {
        model.__name__: list(model._default_manager.order_by("pk").values()) for model in models
    }


def staff_client(username: str, *permissions: str) -> Client:
    user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    for permission in permissions:
        app_label, codename = permission.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    client = Client()
    client.force_login(user)
    return client


def action_named(scene: Scene, name: str) -> Action:
    return next(a for a in actions(scene) if a.name == name)


@pytest.mark.parametrize("name", ACTION_NAMES)
def test_staff_without_the_permission_sees_no_control_and_a_forged_post_changes_nothing(
    scene, name
):
    action = action_named(scene, name)
    # Victor holds every console permission except the one this action needs.
    others = {a.permission for a in actions(scene)} - {action.permission}
    victor = staff_client("victor", *others)

    page = victor.get(action.page)
    assert page.status_code == 200
    assert f'action="{action.control}"' not in page.content.decode()

    before = everything()
    forged = victor.post(action.post, action.data)
    assert forged.status_code == 403
    assert action.permission in forged.content.decode()
    assert everything() == before


@pytest.mark.parametrize("name", ACTION_NAMES)
def test_staff_with_only_that_permission_sees_the_control_and_can_act(scene, name):
    action = action_named(scene, name)
    paula = staff_client("paula", action.permission)

    page = paula.get(action.page)
    assert f'action="{action.control}"' in page.content.decode()

    before = everything()
    done = paula.post(action.post, action.data)
    assert done.status_code == 302
    assert everything() != before


def test_a_superuser_has_every_control(scene):
    root = Client()
    root.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    for action in actions(scene):
        assert f'action="{action.control}"' in root.get(action.page).content.decode(), action.name


def test_a_staff_user_without_permissions_still_reads_every_page(scene):
    victor = staff_client("victor")
    letter = scene.letter
    for path in [
        "/",
        "/dead-letters/",
        "/tenants/",
        f"/deliveries/{letter.delivery_id}/",
        f"/endpoints/{scene.active_endpoint}/",
        f"/endpoints/{scene.active_endpoint}/filter",
    ]:
        response = victor.get(path)
        assert response.status_code == 200, path
    assert letter.reason in victor.get("/dead-letters/").content.decode()
