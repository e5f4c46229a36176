"""JSON Schema 2020-12 for the event-type catalog: checking a schema when it is saved, and
checking events' `data` against their type's schema as they come in (HOMING_VALIDATE_EVENTS).

Validators are compiled once per schema text and kept per process (jsonschema-rs: ~2 µs
for a 2 KB event against a typical schema, where the pure-Python `jsonschema` took
~800). They run offline: a `$ref` must point inside the schema, never at a URL a web
process would fetch while an event waits (and an SSRF door besides).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import jsonschema_rs

from core.exceptions import InvalidInput
from webhooks.services.event_input import json_storable_check

DIALECT = "https://json-schema.org/draft/2020-12/schema"
MAX_SCHEMA_BYTES = 65536
CACHE_VALIDATORS = 10_000  # compiled validators per process; past it the cache starts over

_validators: dict[str, Any] = {}


def schema_check(*, schema: Any) -> dict[str, Any] | bool | None:
    """null, or a valid JSON Schema 2020-12 (an object or a boolean) with local `$ref`s
    only; InvalidInput naming `schema` and where in it otherwise."""
    if schema is None:
        return None
    if not isinstance(schema, dict | bool):
        raise InvalidInput("schema", "Must be a JSON Schema (an object or a boolean) or null.")
    json_storable_check(value=schema, field="schema")
    size = len(json.dumps(schema, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_SCHEMA_BYTES:
        raise InvalidInput("schema", f"At most {MAX_SCHEMA_BYTES} bytes of compact JSON.")
    if isinstance(schema, dict) and schema.get("$schema", DIALECT).rstrip("#") != DIALECT:
        raise InvalidInput("schema.$schema", f"Only JSON Schema 2020-12 ({DIALECT}).")
    _local_references_only(schema)
    try:
        jsonschema_rs.meta.validate(schema)
    except jsonschema_rs.ValidationError as exc:
        raise InvalidInput(_path("schema", exc.instance_path), exc.message) from None
    try:
        validator_for(schema)
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
        raise InvalidInput("schema", str(exc).splitlines()[0]) from None
    return schema


def _local_references_only(schema: Any) -> None:
    stack = [(schema, "schema")]
    while stack:
        node, at = stack.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                if key in ("$ref", "$dynamicRef") and not (
                    isinstance(child, str) and child.startswith("#")
                ):
                    raise InvalidInput(
                        f"{at}.{key}", "Only references inside the schema (`#/$defs/...`)."
                    )
                stack.append((child, f"{at}.{key}"))
        elif isinstance(node, list):
            stack.extend((child, f"{at}[{n}]") for n, child in enumerate(node))


def validator_for(schema: dict[str, Any] | bool) -> Any:
    """The compiled validator of `schema`, from the process's cache."""
    text = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    found = _validators.get(text)
    if found is None:
        if len(_validators) >= CACHE_VALIDATORS:
            _validators.clear()
        found = _validators[text] = jsonschema_rs.Draft202012Validator(schema, offline=True)
    return found


def data_error(*, schema: dict[str, Any] | bool, data: Any, field: str) -> InvalidInput | None:
    """None when `data` satisfies `schema`, else the error naming the failing path
    (`events[3].data.items[0].sku`)."""
    validator = validator_for(schema)
    if validator.is_valid(data):  # the usual case: no error objects built
        return None
    error = next(iter(validator.iter_errors(data)))
    return InvalidInput(_path(field, error.instance_path), error.message)


def examples_check(*, examples: Any, schema: dict[str, Any] | bool | None) -> list[Any]:
    """A list of at most 10 `data` objects, each satisfying the schema when there is one."""
    if examples is None:
        return []
    if not isinstance(examples, list) or len(examples) > 10:
        raise InvalidInput("examples", "Must be a list of at most 10 `data` objects.")
    for n, example in enumerate(examples):
        if not isinstance(example, dict):
            raise InvalidInput(f"examples[{n}]", "Must be a JSON object (an event's `data`).")
        json_storable_check(value=example, field=f"examples[{n}]")
        if schema is not None:
            error = data_error(schema=schema, data=example, field=f"examples[{n}]")
            if error is not None:
                raise error
    return examples


def _path(field: str, parts: Sequence[str | int]) -> str:
    path = field
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def validators_forget() -> None:
    _validators.clear()
