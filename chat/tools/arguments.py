"""A tool call's arguments, as the model wrote them, parsed and checked against the tool's schema.

The model's text is hostile: the arguments must be one JSON object of bounded size, and they are
checked against the JSON-schema keywords tools use (type, properties, required,
additionalProperties, enum, const, items, length and range bounds). A keyword not known here
checks nothing (the tool checks its own input as well).
"""

from __future__ import annotations

import json
from typing import Any

MAX_ARGUMENT_CHARS = 16_000
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


class BadArguments(ValueError):
    """Arguments that are not JSON or do not match the schema; the message names where (for the model and the page)."""


def parse_arguments(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    if len(text) > MAX_ARGUMENT_CHARS:
        raise BadArguments(f"the arguments are longer than {MAX_ARGUMENT_CHARS} characters")
    try:
        value = json.loads(text or "{}")
    except ValueError as error:
        raise BadArguments(f"the arguments are not valid JSON ({error.msg})") from error
    if not isinstance(value, dict):
        raise BadArguments("the arguments must be a JSON object")
    check(value, schema, "arguments")
    return value


def _is(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(kind, object))


def check(value: Any, schema: Any, where: str) -> None:
    """Raise BadArguments where ``value`` breaks ``schema``."""
    if not isinstance(schema, dict):
        return
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is(value, kind) for kind in kinds):
            raise BadArguments(f"{where} must be of type {' or '.join(map(str, kinds))}")
    if "const" in schema and value != schema["const"]:
        raise BadArguments(f"{where} must be {json.dumps(schema['const'])}")
    if "enum" in schema and value not in schema["enum"]:
        raise BadArguments(f"{where} must be one of {json.dumps(schema['enum'])[:200]}")
    if isinstance(value, str):
        _bounds(len(value), schema.get("minLength"), schema.get("maxLength"), where, "characters")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _range(value, schema, where)
    if isinstance(value, list):
        _bounds(len(value), schema.get("minItems"), schema.get("maxItems"), where, "items")
        for index, item in enumerate(value):
            check(item, schema.get("items"), f"{where}[{index}]")
    if isinstance(value, dict):
        _object(value, schema, where)


def _object(value: dict, schema: dict, where: str) -> None:
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            raise BadArguments(f"{where}.{name} is required")
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            check(item, properties[name], f"{where}.{name}")
        elif extra is False:
            raise BadArguments(f"{where}.{str(name)[:40]} is not a known argument")
        else:
            check(item, extra, f"{where}.{str(name)[:40]}")


def _bounds(size: int, low: Any, high: Any, where: str, unit: str) -> None:
    if isinstance(low, int) and size < low:
        raise BadArguments(f"{where} must have at least {low} {unit}")
    if isinstance(high, int) and size > high:
        raise BadArguments(f"{where} must have at most {high} {unit}")


def _range(value: float, schema: dict, where: str) -> None:
    low, high = schema.get("minimum"), schema.get("maximum")
    if isinstance(low, (int, float)) and value < low:
        raise BadArguments(f"{where} must be at least {low}")
    if isinstance(high, (int, float)) and value > high:
        raise BadArguments(f"{where} must be at most {high}")
