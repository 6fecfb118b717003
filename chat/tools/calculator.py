"""Safe arithmetic for the built-in calculator: an allowlist of ``ast`` nodes, never ``eval``.

Numbers (int, float), + - * / // % ** and unary signs, parentheses. Bounds keep a hostile
expression from taking the web process's CPU or memory: its length, its depth, the size of an
exponent, and the size of every intermediate integer.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

from django.utils.translation import gettext as _

MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 1000
MAX_DIGITS = 1000  # an integer result longer than this is refused
MAX_DEPTH = 40
MAX_BITS = int(MAX_DIGITS * 3.33)

_BINARY: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class CalculationError(ValueError):
    """An expression the calculator refuses or cannot compute; the message is fit to show."""


def calculate(expression: str) -> int | float:
    """The value of ``expression``; CalculationError for anything but bounded arithmetic."""
    if not isinstance(expression, str) or not expression.strip():
        raise CalculationError(_("The expression is empty."))
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculationError(_("The expression is too long."))
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError) as error:
        raise CalculationError(_("The expression is not arithmetic.")) from error
    return _value(tree.body, 0)


def _value(node: ast.AST, depth: int) -> int | float:
    if depth > MAX_DEPTH:
        raise CalculationError(_("The expression is too deeply nested."))
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _bounded(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _bounded(_UNARY[type(node.op)](_value(node.operand, depth + 1)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left, depth + 1), _value(node.right, depth + 1)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise CalculationError(_("The exponent is too large (at most %(n)d).") % {"n": MAX_EXPONENT})
        if isinstance(node.op, ast.Pow) and isinstance(left, int) and left.bit_length() * abs(right) > MAX_BITS:
            raise CalculationError(_("The result is too large."))  # refused before it is computed
        try:
            return _bounded(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError as error:
            raise CalculationError(_("Division by zero.")) from error
        except (OverflowError, ValueError) as error:
            raise CalculationError(_("The result is too large.")) from error
    raise CalculationError(_("Only numbers and + - * / // % ** and parentheses are allowed."))


def _bounded(value) -> int | float:
    if isinstance(value, complex):  # a negative number to a fractional power
        raise CalculationError(_("The result is not a real number."))
    if isinstance(value, int) and value.bit_length() > MAX_BITS:
        raise CalculationError(_("The result is too large."))
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculationError(_("The result is too large."))
    return value
