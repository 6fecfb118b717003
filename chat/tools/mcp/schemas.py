"""A tool's JSON schema checked when the server lists it, and arguments checked against it before a call.

`jsonschema` (which the MCP SDK depends on itself) does both: the schema against its own metaschema
(the draft it names, 2020-12 when it names none), the arguments against the schema.
"""

from __future__ import annotations

import re
from typing import Any

from django.utils.translation import gettext as _
from jsonschema import Draft202012Validator, SchemaError, validators
from jsonschema.exceptions import best_match

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
PROBLEM_MAX_CHARS = 300


def _validator(schema: dict[str, Any]):
    return validators.validator_for(schema, default=Draft202012Validator)


def schema_problem(name: str, schema: Any) -> str:
    """Why a listed tool cannot be offered to the model (a message for staff), or "" when it can."""
    if not TOOL_NAME.match(name):
        return _("Its name is not one a model can call (letters, digits, _ and -, at most 64).")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return _("Its input schema is not a JSON schema of an object.")
    try:
        _validator(schema).check_schema(schema)
    except SchemaError as error:
        return _("Its input schema is invalid: %(problem)s") % {"problem": str(error.message)[:PROBLEM_MAX_CHARS]}
    return ""


def arguments_problem(schema: dict[str, Any], arguments: Any) -> str:
    """Why these arguments do not fit the tool's schema (a message a person reads), or "" when they do."""
    if not isinstance(arguments, dict):
        return _("The arguments are not a JSON object.")
    error = best_match(_validator(schema)(schema).iter_errors(arguments))
    if error is None:
        return ""
    where = "/".join(str(part) for part in error.absolute_path)
    detail = str(error.message)[:PROBLEM_MAX_CHARS]
    if where:
        return _("The argument %(where)s does not fit the tool's schema: %(problem)s") % {
            "where": where,
            "problem": detail,
        }
    return _("The arguments do not fit the tool's schema: %(problem)s") % {"problem": detail}
