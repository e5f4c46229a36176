"""The import graph of the apps, read with `ast` (nothing is imported or run).

Rules (STYLE.md habit 3, LAYOUT.md): the packages form layers, `LAYERS` from the bottom,
and every module (models, services, selectors, views, tasks, commands) imports only its
own package and those below it: models point webhooks <- deliveries <- dlq, and so does
everything else. A lower app reaches a higher one only through a signal it sends, whose
receiver the higher app connects in its `AppConfig.ready()`. No app imports another
app's views; no two files import each other; `core/` imports no app.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("webhooks", "deliveries", "dlq", "console", "portal")
PACKAGES = ("core", "api", "config", *APPS)
# app -> apps whose models it must never import (the arrows point the other way).
FORBIDDEN_MODELS = {"webhooks": ("deliveries", "dlq"), "deliveries": ("dlq",)}
# From the bottom: plumbing (`core`, then `api`, the DRF pieces every app's API uses), the
# apps in the order their models point, the UIs over them, and the project (`config`:
# settings, urls, the processes' set-up) on top.
LAYERS = ("core", "api", "webhooks", "deliveries", "dlq", "console", "portal", "config")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (at any depth in the file)."""
    graph: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            module = _module_name(path)
            imported: set[str] = set()
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Import):
                    imported.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    imported.add(node.module)
                    imported.update(f"{node.module}.{alias.name}" for alias in node.names)
            graph[module] = {name for name in imported if name.split(".")[0] in PACKAGES}
    return graph


def _file_of(graph: dict[str, set[str]], name: str) -> str | None:
    """The module an imported name lives in: `from a.b import c` names a.b.c, which is a
    module or something inside a.b."""
    while name and name not in graph:
        name = name.rpartition(".")[0]
    return name or None


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
