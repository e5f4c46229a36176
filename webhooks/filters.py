"""Endpoint filters: the JSON match syntax of Hookdeck, Outpost and Convoy, compiled.

A filter is matched against the document `{"type", "data", "ordering_key"}` of an event
(CONTRACT section 2 states the rules; README shows examples). It is compiled once into a
tree of closures (`filter_compile`), so routing an event calls a predicate and never
reads the filter's JSON again (DESIGN decision 24). Compiling also checks it: a bad
filter raises InvalidInput naming its path (`filter.data.amount.$gte`), which the API
renders as a 400.

The same compiler, given a `trace` list, builds closures that also note why a clause
failed: `filter_explain` answers POST /endpoints/{id}/filter-test from it, so the
explanation can never disagree with routing. Pure: no Django, no database.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable
from typing import Any

from core.exceptions import InvalidInput

MAX_BYTES = 4096  # compact JSON, UTF-8
MAX_LEVELS = 16  # the top-level object is level 1
FIELDS = ("type", "data", "ordering_key")  # what a filter matches at its top level


class _Missing:
    """A field the event does not have: equal to nothing, not even null."""

    def __repr__(self) -> str:
        return "missing"


MISSING: Any = _Missing()

Predicate = Callable[[Any], bool]
Trace = list[tuple[str, str]]


def filter_check(spec: Any, *, field: str = "filter") -> Any:
    """`spec` if it is a valid filter (or null); InvalidInput naming the path otherwise."""
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise InvalidInput(field, "expected an object (or null)")
    _check_shape(spec, field)
    size = len(json.dumps(spec, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_BYTES:
        raise InvalidInput(field, f"at most {MAX_BYTES} bytes of compact JSON, not {size}")
    Compiler(None).document(spec, field)
    return spec


def filter_compile(spec: dict[str, Any]) -> Predicate:
    """A predicate over an event document; raises InvalidInput for a bad filter."""
    filter_check(spec)
    return Compiler(None).document(spec, "filter")


def filter_explain(spec: dict[str, Any] | None, document: dict[str, Any]) -> tuple[bool, str]:
    """Whether `document` matches `spec`, and which clauses failed if it does not."""
    if not spec:
        return True, "No filter: every event matches."
    trace: Trace = []
    matched = Compiler(trace).document(filter_check(spec), "filter")(document)
    if matched:
        return True, "Every clause matched."
    return False, "; ".join(f"{path}: {why}" for path, why in trace) or "No clause matched."


def event_document(event_type: str, data: Any, ordering_key: str | None) -> dict[str, Any]:
    """What a filter is matched against (`ordering_key` always present, null when none)."""
    return {"type": event_type, "data": data, "ordering_key": ordering_key}


# --- strict JSON equality -------------------------------------------------------------


def json_equal(a: Any, b: Any) -> bool:
    """JSON's equality: `"150"` != 150, true != 1, 150 == 150.0, lists in order."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    if isinstance(a, int | float):
        return isinstance(b, int | float) and a == b
    if isinstance(a, str):
        return isinstance(b, str) and a == b
    if isinstance(a, list):
        return (
            isinstance(b, list)
            and len(a) == len(b)
            and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and a.keys() == b.keys()
            and all(json_equal(value, b[key]) for key, value in a.items())
        )
    return False  # MISSING equals nothing


def _equal_to(expected: Any) -> Predicate:
    """`json_equal(expected, value)` specialised for the usual scalar operands."""
    if isinstance(expected, bool) or expected is None:
        return lambda value: value is expected
    if isinstance(expected, str):
        return lambda value: value.__class__ is str and value == expected
    if isinstance(expected, int | float):
        return lambda value: (
            value.__class__ in (int, float) and value == expected
        )  # bool's class is bool: not a number here
    return lambda value: json_equal(expected, value)


def _ordered(compare: Callable[[Any, Any], bool], operand: int | float | str) -> Predicate:
    """`compare(value, operand)` for a value of the operand's kind (number with number,
    string with string): anything else is no match, never an error. One call per value:
    routing asks this of every event, per endpoint comparing a field."""
    if operand.__class__ is str:
        return lambda value: value.__class__ is str and compare(value, operand)
    return lambda value: value.__class__ in _NUMBERS and compare(value, operand)


_NUMBERS = (int, float)  # bool's class is bool: not a number here


# --- the compiler ---------------------------------------------------------------------

COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}
SYMBOLS = {"$gt": ">", "$gte": "≥", "$lt": "<", "$lte": "≤"}
LOGICAL = ("$or", "$and", "$not")
OPERATORS = (
    "$eq",
    "$neq",
    *COMPARISONS,
    "$in",
    "$nin",
    "$startsWith",
    "$endsWith",
    "$exist",
    *LOGICAL,
)


def _show(value: Any) -> str:
    if value is MISSING:
        return "missing"
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= 60 else text[:57] + "..."


class Compiler:
    """Turns a filter into closures. With a `trace`, each leaf that fails notes its path
    and why, and a clause that matches after all (a branch of `$or`) takes its notes back."""

    def __init__(self, trace: Trace | None) -> None:
        self.trace = trace

    def document(self, spec: dict[str, Any], path: str) -> Predicate:
        """The top level: fields `type`, `data`, `ordering_key`, or `$or $and $not`."""
        for key in spec:
            if key.startswith("$"):
                if key not in LOGICAL:
                    raise InvalidInput(
                        f"{path}.{key}",
                        "only $or, $and and $not may stand at the top level"
                        if key in OPERATORS
                        else "unknown operator",
                    )
            elif key not in FIELDS:
                raise InvalidInput(
                    f"{path}.{key}", "unknown field: a filter matches type, data and ordering_key"
                )
        return self._object(spec, path, top=True)

    def value(self, spec: Any, path: str) -> Predicate:
        """Any filter value against an event value (which may be MISSING)."""
        if isinstance(spec, dict):
            return self._object(spec, path, top=False)
        if isinstance(spec, list):
            return self._contains_all(spec, path)
        equal = _equal_to(spec)

        def scalar(value: Any) -> bool:
            # A list holding the value matches it ("contains").
            if value.__class__ is list:
                return any(equal(item) for item in value)
            return equal(value)

        return self._leaf(scalar, path, lambda value: f"{_show(value)} is not {_show(spec)}")

    def _object(
        self, spec: dict[str, Any], path: str, *, top: bool, in_lists: bool = True
    ) -> Predicate:
        """`in_lists`: against an event list, one element holds it (not for an item of a
        list in the filter, which an element holds itself)."""
        operators = []
        fields = []
        for key, operand in spec.items():
            if key.startswith("$"):
                if top:  # document() allowed only the logical ones here
                    operators.append(
                        self.operator_predicate(key, operand, f"{path}.{key}", top=True)
                    )
                else:
                    operators.append(self.operator_predicate(key, operand, f"{path}.{key}"))
            else:
                fields.append((key, self.value(operand, f"{path}.{key}")))
        checks = tuple(operators)
        if not fields:
            return self._all(checks)
        by_field = tuple(fields)

        def subset(value: Any) -> bool:
            if value.__class__ is dict:
                return all(match(value.get(key, MISSING)) for key, match in by_field)
            # Not an object: every field of it is missing (so `$neq` under it matches).
            return all(match(MISSING) for _, match in by_field)

        if top or not in_lists:
            return self._all((*checks, subset))

        def in_list(value: Any) -> bool:  # an object against a list: one element holds it
            if value.__class__ is list:
                return any(item.__class__ is dict and subset(item) for item in value)
            return subset(value)

        return self._all((*checks, self._forgiving(in_list)))

    def _all(self, checks: tuple[Predicate, ...]) -> Predicate:
        if len(checks) == 1:
            return checks[0]
        if not checks:
            return lambda value: True  # `{}`: a subset of anything
        return lambda value: all(check(value) for check in checks)

    def _contains_all(self, spec: list[Any], path: str) -> Predicate:
        """A list in a filter: the event's list holds every item, in any order. An item
        is held by an element equal to it (a list item: an element list holding all of
        its items; an object: an element object holding it by subset), never by an
        element list holding it: `[1]` is not in `[[1, 2]]`, as `1` is not."""
        items = tuple(self._item(item, f"{path}[{n}]") for n, item in enumerate(spec))

        def contains_all(value: Any) -> bool:
            if value.__class__ is not list:
                return False
            return all(any(item(element) for element in value) for item in items)

        return self._leaf(
            contains_all, path, lambda value: f"{_show(value)} does not contain {_show(spec)}"
        )

    def _item(self, spec: Any, path: str) -> Predicate:
        if isinstance(spec, dict):
            return self._object(spec, path, top=False, in_lists=False)
        if isinstance(spec, list):
            return self._contains_all(spec, path)
        return _equal_to(spec)

    def operator_predicate(
        self, name: str, operand: Any, path: str, *, top: bool = False
    ) -> Predicate:
        """One `$operator: operand` of an object (of the document itself when `top`)."""
        if top:
            return self._logical(name, operand, path, top=True)
        if name in LOGICAL:
            return self._logical(name, operand, path, top=False)
        if name in ("$eq", "$neq"):
            equal = _equal_to(operand)
            if name == "$eq":
                return self._leaf(equal, path, lambda v: f"{_show(v)} is not {_show(operand)}")
            return self._leaf(
                lambda value: not equal(value), path, lambda v: f"{_show(v)} is {_show(operand)}"
            )
        if name in COMPARISONS:
            if operand.__class__ not in (int, float, str):
                raise InvalidInput(path, "expected a number or a string")
            return self._leaf(
                _ordered(COMPARISONS[name], operand),
                path,
                lambda v: f"{_show(v)} is not {SYMBOLS[name]} {_show(operand)}",
            )
        if name in ("$in", "$nin"):
            if not isinstance(operand, list):
                raise InvalidInput(path, "expected a list")
            choices = tuple(_equal_to(item) for item in operand)
            if name == "$in":
                return self._leaf(
                    lambda value: any(equal(value) for equal in choices),
                    path,
                    lambda v: f"{_show(v)} is not in {_show(operand)}",
                )
            return self._leaf(
                lambda value: not any(equal(value) for equal in choices),
                path,
                lambda v: f"{_show(v)} is in {_show(operand)}",
            )
        if name in ("$startsWith", "$endsWith"):
            if not isinstance(operand, str):
                raise InvalidInput(path, "expected a string")
            if name == "$startsWith":
                test = lambda value: value.__class__ is str and value.startswith(operand)  # noqa: E731
            else:
                test = lambda value: value.__class__ is str and value.endswith(operand)  # noqa: E731
            verb = "start" if name == "$startsWith" else "end"
            return self._leaf(test, path, lambda v: f"{_show(v)} does not {verb} with {operand!r}")
        if name == "$exist":
            if not isinstance(operand, bool):
                raise InvalidInput(path, "expected true or false")
            if operand:
                return self._leaf(lambda value: value is not MISSING, path, lambda v: "missing")
            return self._leaf(lambda value: value is MISSING, path, lambda v: "present")
        raise InvalidInput(path, "unknown operator")

    def _logical(self, name: str, operand: Any, path: str, *, top: bool) -> Predicate:
        def branch(spec: Any, at: str) -> Predicate:
            if top:  # over the document: each branch is a top-level filter itself
                if not isinstance(spec, dict):
                    raise InvalidInput(at, "expected an object")
                return self.document(spec, at)
            return self.value(spec, at)

        if name == "$not":
            inner = branch(operand, path)
            return self._leaf(lambda value: not inner(value), path, lambda v: "the clause matched")
        if not isinstance(operand, list) or not operand:
            raise InvalidInput(path, "expected a non-empty list")
        branches = tuple(branch(spec, f"{path}[{n}]") for n, spec in enumerate(operand))
        if name == "$and":
            return lambda value: all(match(value) for match in branches)
        return self._forgiving(lambda value: any(match(value) for match in branches))

    # --- tracing (filter_explain only; the routing predicates carry none of it) -------

    def _leaf(self, test: Predicate, path: str, why: Callable[[Any], str]) -> Predicate:
        trace = self.trace
        if trace is None:
            return test

        def traced(value: Any) -> bool:
            mark = len(trace)
            if test(value):
                del trace[mark:]  # e.g. a `$not` whose inner clause failed
                return True
            del trace[mark:]
            trace.append((path, why(value)))
            return False

        return traced

    def _forgiving(self, test: Predicate) -> Predicate:
        """A clause that may match although some of its parts failed (`$or`)."""
        trace = self.trace
        if trace is None:
            return test

        def traced(value: Any) -> bool:
            mark = len(trace)
            if test(value):
                del trace[mark:]
                return True
            return False

        return traced


def _check_shape(spec: Any, path: str) -> None:
    """Depth (the top-level object is level 1), and only values jsonb can store and
    compare: finite numbers, strings without NUL. The path names the first fault."""
    stack = [(spec, path, 1)]
    while stack:
        node, at, level = stack.pop()
        if isinstance(node, dict | list):
            if level > MAX_LEVELS:
                raise InvalidInput(at, f"nested deeper than {MAX_LEVELS} levels")
            if isinstance(node, dict):
                for key, child in node.items():
                    if not isinstance(key, str) or not _storable(key):
                        raise InvalidInput(at, "a key holds a NUL character or a lone surrogate")
                    stack.append((child, f"{at}.{key}", level + 1))
            else:
                stack.extend((child, f"{at}[{n}]", level + 1) for n, child in enumerate(node))
        elif isinstance(node, str):
            if not _storable(node):
                raise InvalidInput(at, "a string holds a NUL character or a lone surrogate")
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise InvalidInput(at, "expected a finite number")
        elif not (node is None or isinstance(node, bool | int)):
            raise InvalidInput(at, "expected a JSON value")


def _storable(text: str) -> bool:
    """What jsonb stores: no NUL, no lone surrogate (`"\\ud800"` parses, cannot be saved)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
