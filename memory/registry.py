"""The memory designs the agent can pick, by the strategy name the user and the configuration see
(memory.settings.STRATEGIES is these names and "none", no memory). A third design is one package with a
class that implements memory.design.MemoryDesign, and one entry here. Every design is built at each
session close, in this order, so switching strategy compares them on the same history.

Nothing is imported here at run time: memory.settings reads the names, and a design's package loads
when the agent first builds it."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

# (settings, clients) -> the design. Typed loosely on purpose: importing memory.design or memory.settings
# here, even for types, would close an import circle (settings reads these names). The agent holds the
# designs as memory.design.MemoryDesign, and tests/test_designs.py checks each class against it.
DesignFactory = Callable[[Any, Any], Any]


def _design(module: str, cls: str) -> DesignFactory:
    """A factory that loads `module` (relative to memory/) when the agent first builds the design."""

    def make(settings: Any, clients: Any) -> Any:
        return getattr(import_module(module, __package__), cls).from_clients(settings, clients)

    return make


DESIGNS: dict[str, DesignFactory] = {
    "theanine": _design(".theanine.strategy", "TheanineMemory"),
    "secom": _design(".secom.strategy", "SecomMemory"),
}
