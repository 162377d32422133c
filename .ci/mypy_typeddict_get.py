"""A mypy plugin: `d.get("key")` on a TypedDict must name one of its keys.

mypy checks `d["key"]` but lets `.get` of an unknown key pass (typed `object`). The trace's readers
(See why, Compare, forget's scrubbing, the benchmarks) read it with `.get`, since a trace stored by an
earlier version may lack a key; without this check a key renamed in memory.trace_types would leave
them reading a name no trace holds. Configured in pyproject.toml ([tool.mypy] plugins).
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.errorcodes import TYPEDDICT_ITEM
from mypy.plugin import MethodContext, Plugin
from mypy.plugins.default import typed_dict_get_callback
from mypy.typeops import try_getting_str_literals
from mypy.types import Type, TypedDictType, get_proper_type


class TypedDictGetKeys(Plugin):
    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        return _checked_get if fullname == "typing.Mapping.get" else None


def _checked_get(ctx: MethodContext) -> Type:
    td = get_proper_type(ctx.type)
    if isinstance(td, TypedDictType) and ctx.args and ctx.args[0] and ctx.arg_types[0]:
        for key in try_getting_str_literals(ctx.args[0][0], ctx.arg_types[0][0]) or ():
            if key not in td.items:
                name = td.fallback.type.name
                ctx.api.fail(f'TypedDict "{name}" has no key "{key}"', ctx.context, code=TYPEDDICT_ITEM)
    return typed_dict_get_callback(ctx)  # then mypy's own typing of the call


def plugin(version: str) -> type[Plugin]:
    return TypedDictGetKeys
