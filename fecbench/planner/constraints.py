"""Constraints over factor names, e.g. "owd_1 <= 2 * owd_2", parsed with `ast` and never eval'd.

Allowed: numbers, strings, factor names, + - * / // % **, comparisons (chains too), and/or/not,
and the functions abs, min, max, log, log10, sqrt, exp. Evaluation is vectorised: every name is an
array of natural values (one per point), and the result is a boolean mask.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from fecbench.inputs.errors import SpecError
from fecbench.planner import portable

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: portable.power}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge}
# log, log10, exp and ** are fecbench's own (portable.py): numpy's and the C library's differ between
# CPUs in the last bit, which could make a point on a constraint's boundary feasible on one machine only.
_FUNCTIONS = {"abs": np.abs, "min": np.minimum, "max": np.maximum, "log": portable.log, "log10": portable.log10,
              "sqrt": np.sqrt, "exp": portable.exp}


@dataclass(frozen=True)
class Constraint:
    text: str
    tree: ast.Expression

    def evaluate(self, values: dict[str, Any], n: int) -> np.ndarray:
        """Boolean mask over n points; `values` maps factor names to arrays (or scalars for fixed ones)."""
        with np.errstate(all="ignore"):  # log of 0 etc. gives nan/inf, which compares as False
            result = _eval(self.tree.body, values)
        return np.broadcast_to(np.asarray(result, dtype=bool), (n,)).copy()


def compile_constraint(text: str, names: list[str], file: Any, key: str) -> Constraint:
    """Parse a constraint and check it uses only allowed syntax and known factor names."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise SpecError(file, key, f"invalid expression {text!r}: {exc.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in names and node.id not in _FUNCTIONS:
            raise SpecError(file, key, f"unknown factor {node.id!r} in {text!r}", names)
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords:
                raise SpecError(file, key, f"only these functions may be called in {text!r}", sorted(_FUNCTIONS))
            arity = 2 if node.func.id in ("min", "max") else 1
            if len(node.args) != arity:
                raise SpecError(file, key, f"{node.func.id}() takes {arity} argument(s) in {text!r}")
        elif isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, str)):
            raise SpecError(file, key, f"unsupported constant {node.value!r} in {text!r}")
        elif not isinstance(node, (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub,
                                   ast.UAdd, ast.BinOp, ast.Compare, ast.Name, ast.Load, ast.Constant,
                                   ast.Call, *_BINARY, *_COMPARE)):
            raise SpecError(file, key, f"unsupported syntax ({type(node).__name__}) in {text!r}",
                            "numbers, strings, factor names, + - * / // % **, comparisons, and/or/not, "
                            + ", ".join(sorted(_FUNCTIONS)))
    if isinstance(tree.body, ast.Name) and tree.body.id in _FUNCTIONS:
        raise SpecError(file, key, f"{text!r} is not a condition")
    return Constraint(text=text, tree=tree)


def _eval(node: ast.AST, values: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.BoolOp):
        parts = [np.asarray(_eval(v, values), dtype=bool) for v in node.values]
        combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        result = parts[0]
        for part in parts[1:]:
            result = combine(result, part)
        return result
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, values)
        if isinstance(node.op, ast.Not):
            return np.logical_not(operand)
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_number(_eval(node.left, values)), _number(_eval(node.right, values)))
    if isinstance(node, ast.Compare):
        left = _eval(node.left, values)
        result: Any = True
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _eval(right_node, values)
            result = np.logical_and(result, _compare(_COMPARE[type(op)], left, right))
            left = right
        return result
    if isinstance(node, ast.Call):
        return _FUNCTIONS[node.func.id](*(_number(_eval(a, values)) for a in node.args))
    raise AssertionError(f"unchecked node {type(node).__name__}")  # compile_constraint rejects the rest


def _number(value: Any) -> Any:
    """Arithmetic on choice levels (object arrays of numbers) needs a numeric dtype."""
    if isinstance(value, np.ndarray) and value.dtype == object:
        try:
            return value.astype(float)
        except (TypeError, ValueError):
            return np.full(value.shape, np.nan)  # arithmetic on a string level: never satisfied
    return value


def _compare(op: Any, left: Any, right: Any) -> Any:
    if op in (operator.eq, operator.ne):
        return op(np.asarray(left, dtype=object), right) if isinstance(right, str) or isinstance(left, str) \
            else op(left, right)
    try:
        return op(_number(left), _number(right))
    except TypeError:  # ordering a string against a number
        return False
