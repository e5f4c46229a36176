"""The import graph of the apps, read with `ast` (nothing is imported or run).

Rules (STYLE.md habit 3, LAYOUT.md): the packages form layers, `LAYERS` from the bottom,
and every module (models, services, selectors, views, tasks, commands) imports only its
own package and those below it: models point webhooks <- deliveries <- dlq, and so does
everything else. A lower app reaches a higher one only through a signal it sends, whose
receiver the higher app connects in its `AppConfig.ready()`. No app imports another
app's views; no two files import each other; `core/` imports no app. Inside deliveries/
the four rooms import only down their arrows (`python -m tests.architecture` prints them).
"""

from __future__ import annotations

from tests.architecture import (
    APPS,
    BASE,
    PACKAGES,
    ROOM_ARROWS,
    file_of,
    import_graph,
    path_of,
    room_arrows,
    room_of,
)

# app -> apps whose models it must never import (the arrows point the other way).
FORBIDDEN_MODELS = {"webhooks": ("deliveries", "dlq"), "deliveries": ("dlq",)}
# From the bottom: plumbing (`core`, then `api`, the DRF pieces every app's API uses), the
# apps in the order their models point, the UIs over them, and the project (`config`:
# settings, urls, the processes' set-up) on top.
LAYERS = ("core", "api", "webhooks", "deliveries", "dlq", "console", "portal", "config")
_file_of = file_of


def _top(module: str) -> str:
    return module.split(".")[0]


def _is_models(module: str) -> bool:
    return module.split(".")[1:2] == ["models"]


def _is_views(module: str) -> bool:
    parts = module.split(".")
    return "views" in parts[1:] or (parts[1:2] == ["api"] and parts[2:3] == ["views"])


def test_graph_finds_the_modules():
    graph = import_graph()
    assert "webhooks.models" in graph and "deliveries.models" in graph["dlq.models"]


def test_no_app_imports_another_apps_views():
    offenders = [
        f"{module} -> {name}"
        for module, names in import_graph().items()
        for name in names
        if _top(module) in APPS
        and _top(name) in APPS
        and _top(name) != _top(module)
        and _is_views(name)
    ]
    assert offenders == []


def test_models_point_one_way():
    offenders = [
        f"{module} -> {name}"
        for module, names in import_graph().items()
        for name in names
        if _top(name) in FORBIDDEN_MODELS.get(_top(module), ()) and _is_models(name)
    ]
    assert offenders == []


def test_every_module_imports_only_its_layer_and_those_below():
    assert sorted(LAYERS) == sorted(PACKAGES)
    rank = {package: n for n, package in enumerate(LAYERS)}
    graph = import_graph()
    upward = {
        f"{module} -> {_file_of(graph, name)}"
        for module, names in graph.items()
        for name in names
        if rank[_top(name)] > rank[_top(module)]
    }
    assert sorted(upward) == []


def test_core_imports_no_app():
    offenders = [
        f"{module} -> {name}"
        for module, names in import_graph().items()
        if _top(module) == "core"
        for name in names
        if _top(name) not in ("core",)
    ]
    assert offenders == []


def test_no_two_files_import_each_other():
    graph = import_graph()
    edges = {
        (module, target)
        for module, names in graph.items()
        for name in names
        if (target := _file_of(graph, name)) and target != module
    }
    cycles = sorted({tuple(sorted(pair)) for pair in edges if pair[::-1] in edges})
    assert cycles == []


def test_the_rooms_of_deliveries_import_only_down_their_arrows():
    """intake -> lifecycle -> results; worker -> lifecycle, transport, results; transport
    -> results only; no room imports the worker (LAYOUT.md)."""
    wrong = sorted(
        pair
        for room, targets in room_arrows(import_graph()).items()
        for target, pairs in targets.items()
        if target not in ROOM_ARROWS[room]
        for pair in pairs
    )
    assert wrong == []


def test_the_ground_floor_of_deliveries_imports_no_room_above_it():
    graph = import_graph()
    wrong = sorted(
        f"{module} -> {target}"
        for module, allowed in BASE.items()
        for name in graph[module]
        if (target := file_of(graph, name))
        and (room := room_of(target))
        and room not in allowed | {"results"}
    )
    assert wrong == []


def _imports_django(module: str) -> bool:
    return any(
        line.startswith(("import django", "from django"))
        for line in path_of(module).read_text().splitlines()
    )


def test_the_transport_is_pure():
    """No Django in the transport, nor in what it imports: its callers pass every value in
    (STYLE.md habit 2)."""
    graph = import_graph()
    transport = [m for m in graph if room_of(m) == "transport"]
    assert transport
    impure = sorted(
        f"{module} -> {target}"
        for module in transport
        for target in {module} | {file_of(graph, name) or name for name in graph[module]}
        if _imports_django(target)
    )
    assert impure == []


def test_the_rule_checker_sees_a_wrong_arrow():
    graph = {
        "deliveries.lifecycle.recording": {"deliveries.worker.ledger"},
        "deliveries.worker.ledger": set(),
    }
    assert room_arrows(graph)["lifecycle"] == {
        "worker": {"deliveries.lifecycle.recording -> deliveries.worker.ledger"}
    }
