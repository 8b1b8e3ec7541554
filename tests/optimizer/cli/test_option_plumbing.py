"""Issue 26: optimize and review passed their options on with `dict(locals())` and matched them
to config fields by name, so a renamed parameter silently dropped its option. Now each command
lists the options that are config fields of the same name (`CONFIG_OPTIONS`) and reads every
other one by name; these tests fail when an option is neither."""

from __future__ import annotations

import ast
import inspect
from types import ModuleType

import pytest

from promptloop.optimizer.cli import optimize as optimize_cli
from promptloop.optimizer.cli import review as review_cli
from promptloop.optimizer.workflows.optimize import OptimizeConfig
from promptloop.optimizer.workflows.review import ReviewConfig

CASES = [(optimize_cli, "optimize", OptimizeConfig), (review_cli, "review", ReviewConfig)]


def _read_by_name(module: ModuleType, function: str) -> set[str]:
    """Names read as `flags["x"]` anywhere in the module, or used in the command's body
    outside the dict that collects them."""
    tree = ast.parse(inspect.getsource(module))
    out = {node.slice.value for node in ast.walk(tree)
           if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
           and node.value.id == "flags" and isinstance(node.slice, ast.Constant)
           and isinstance(node.slice.value, str)}
    [fn] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    collected = {id(n) for stmt in fn.body if isinstance(stmt, ast.AnnAssign)
                 and isinstance(stmt.target, ast.Name) and stmt.target.id == "flags"
                 for n in ast.walk(stmt)}
    out |= {n.id for stmt in fn.body for n in ast.walk(stmt)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in collected}
    return out


@pytest.mark.parametrize(("module", "function", "config"), CASES, ids=["optimize", "review"])
def test_every_option_reaches_its_config_or_is_read_by_name(
    module: ModuleType, function: str, config: type
) -> None:
    options = set(inspect.signature(getattr(module, function)).parameters)
    forwarded = set(module.CONFIG_OPTIONS)
    assert forwarded <= options, f"not options of {function}: {forwarded - options}"
    assert forwarded <= set(config.model_fields), (
        f"no field of {config.__name__}: {forwarded - set(config.model_fields)}")
    unread = options - forwarded - _read_by_name(module, function)
    assert not unread, f"options of {function} that reach nothing: {sorted(unread)}"
