"""The import graph of Homing's packages and of the rooms inside `deliveries/`, read with
`ast` (nothing is imported or run). `tests/test_layering.py` pins the rules; run

    python -m tests.architecture

to print the rooms and the arrows between them (LAYOUT.md).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("webhooks", "deliveries", "dlq", "console", "portal")
PACKAGES = ("core", "api", "config", *APPS)
# The rooms of deliveries/ (LAYOUT.md) and the rooms each may import. `results` is the
# shared vocabulary of an attempt; `base` is the app's own ground floor (models,
# statuses, signals, wakeups, log context), which every room may use.
ROOMS = ("intake", "lifecycle", "worker", "transport", "results")
ROOM_ARROWS = {
    "intake": {"lifecycle", "results"},
    "lifecycle": {"results"},
    "worker": {"lifecycle", "transport", "results"},
    "transport": {"results"},
    "results": set(),
}
# Modules of deliveries/ at the ground floor: the rooms may import them, they import no room
# but the ones named here (signals names lifecycle's InHand, the type it carries).
BASE = {
    "deliveries.models": set(),
    "deliveries.statuses": set(),
    "deliveries.signals": {"lifecycle"},
    "deliveries.wakeups": set(),
    "deliveries.log_context": set(),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def path_of(module: str) -> Path:
    base = ROOT / module.replace(".", "/")
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (at any depth in the file)."""
    graph: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            module = module_name(path)
            imported: set[str] = set()
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Import):
                    imported.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    imported.add(node.module)
                    imported.update(f"{node.module}.{alias.name}" for alias in node.names)
            graph[module] = {name for name in imported if name.split(".")[0] in PACKAGES}
    return graph


def file_of(graph: dict[str, set[str]], name: str) -> str | None:
    """The module an imported name lives in: `from a.b import c` names a.b.c, which is a
    module or something inside a.b."""
    while name and name not in graph:
        name = name.rpartition(".")[0]
    return name or None


def room_of(module: str) -> str | None:
    """The room of a module of deliveries/, or None outside the rooms."""
    parts = module.split(".")
    if parts[0] != "deliveries" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in ROOMS else None


def room_arrows(graph: dict[str, set[str]]) -> dict[str, dict[str, set[str]]]:
    """Room -> room it imports -> the module pairs that make the arrow."""
    arrows: dict[str, dict[str, set[str]]] = {room: {} for room in ROOMS}
    for module, names in graph.items():
        source = room_of(module)
        if source is None:
            continue
        for name in names:
            target_module = file_of(graph, name)
            target = room_of(target_module or "")
            if target and target != source:
                arrows[source].setdefault(target, set()).add(f"{module} -> {target_module}")
    return arrows


def main() -> None:
    graph = import_graph()
    arrows = room_arrows(graph)
    print("deliveries/ rooms and their arrows (→ imports); allowed per LAYOUT.md:")
    for room in ROOMS:
        modules = sorted(m for m in graph if room_of(m) == room)
        lines = sum(
            len((ROOT / (m.replace(".", "/") + ".py")).read_text().splitlines())
            for m in modules
            if (ROOT / (m.replace(".", "/") + ".py")).exists()
        )
        targets = ", ".join(sorted(arrows[room])) or "nothing"
        allowed = ", ".join(sorted(ROOM_ARROWS[room])) or "nothing"
        print(
            f"  {room:<10} {len(modules):>2} modules {lines:>5} lines  → {targets}"
            f"   (may: {allowed})"
        )
    wrong = [
        pair
        for room, targets in arrows.items()
        for target, pairs in targets.items()
        if target not in ROOM_ARROWS[room]
        for pair in sorted(pairs)
    ]
    print("arrows against the rules:", "none" if not wrong else "")
    for pair in wrong:
        print("   ", pair)


if __name__ == "__main__":
    main()
