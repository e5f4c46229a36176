"""The import graph of the apps, read with `ast` (nothing is imported or run).

Rules (STYLE.md habit 3, LAYOUT.md): models point webhooks <- deliveries <- dlq; no app
imports another app's views; no two files import each other; `core/` imports no app.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("webhooks", "deliveries", "dlq", "console", "portal")
PACKAGES = ("core", "api", "config", *APPS)
# app -> apps whose models it must never import (the arrows point the other way).
FORBIDDEN_MODELS = {"webhooks": ("deliveries", "dlq"), "deliveries": ("dlq",)}


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

    def file_of(name: str) -> str | None:
        # `from a.b import c` names a.b.c, which is a module or something inside a.b.
        while name and name not in graph:
            name = name.rpartition(".")[0]
        return name or None

    edges = {
        (module, target)
        for module, names in graph.items()
        for name in names
        if (target := file_of(name)) and target != module
    }
    cycles = sorted({tuple(sorted(pair)) for pair in edges if pair[::-1] in edges})
    assert cycles == []
