"""The suite's own layout, read with `ast` (nothing is imported or run).

- A test module imports no other test module: a helper two tests share lives in a module
  of its own (`tests/factories.py` for rows and API objects, `tests/processes.py`,
  `tests/migrations.py`, `tests/jobs.py`, ...) or in a conftest fixture. Importing a test
  module also collects its tests' names into the importer and ties the two files' edits.
- Rows and API objects are made in one place, `tests/factories.py`: no test defines its
  own `make_endpoint`, `create_endpoint`, `endpoint(...)`, `dead_letter_for`, ...
  (pytest fixtures may carry such names; they call the factories).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FACTORIES = TESTS / "factories.py"
# tests/deliveries/worker/ is being rewritten with the worker; its test_fair_claims.py
# still defines an `endpoint(actor, n)` of its own. Remove this once it uses factories.
NOT_YET: tuple[Path, ...] = ()

# What a copy of a factory is called (the old names included).
FACTORY_LIKE = re.compile(
    r"^_?(make_|create_|new_)?(endpoint|event|delivery|dead_letter|consumer_key|portal_link)"
    r"(s|_row|_via_api|_id_via_api|_via_http|_for|_of)?$"
)
OLD_NAMES = {"kill", "send_event", "make_link", "dead_letter_for", "consumer_key"}


def _python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def _module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _imported(module: str, source: str) -> list[tuple[int, str]]:
    """(line, module or module.name) for every import in `module`'s source, relative
    ones resolved."""
    package = module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[: len(package) - (node.level - 1)]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def _is_test_module(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "tests" and any(part.startswith("test_") for part in parts[1:])


def test_no_module_of_the_suite_imports_a_test_module():
    offences = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in _python_files()
        for line, module in _imported(_module_of(path), path.read_text())
        if _is_test_module(module)
    ]
    assert not offences, (
        "Move what is shared to tests/factories.py (rows, API objects), another helper "
        "module, or a conftest fixture:\n" + "\n".join(offences)
    )


def _is_fixture(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if ast.unparse(target) in ("pytest.fixture", "fixture"):
            return True
    return False


def test_only_tests_factories_defines_factories():
    offences = []
    for path in _python_files():
        if path == FACTORIES or any(path.is_relative_to(folder) for folder in NOT_YET):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or _is_fixture(node):
                continue
            if FACTORY_LIKE.match(node.name) or node.name in OLD_NAMES:
                offences.append(f"{path.relative_to(ROOT)}:{node.lineno} def {node.name}")
    assert not offences, "Use (or add to) tests/factories.py:\n" + "\n".join(offences)


def test_the_rules_catch_what_they_name():
    # The checks themselves: an import of a test module, relative or absolute, is seen;
    # the old helpers' names count as factories, other helpers' names do not.
    source = "from .test_replay import kill\nimport tests.e2e.test_delivery\n"
    found = [module for _, module in _imported("tests.dlq.test_x", source)]
    assert "tests.dlq.test_replay" in found and "tests.e2e.test_delivery" in found
    assert not _is_test_module("tests.factories")
    for name in ("make_endpoint", "create_endpoint", "_endpoint", "endpoint", "dead_letter_for"):
        assert FACTORY_LIKE.match(name) or name in OLD_NAMES, name
    assert not FACTORY_LIKE.match("make_backlog") and not FACTORY_LIKE.match("endpoints_page")
