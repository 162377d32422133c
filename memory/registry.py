"""The memory designs the agent can pick, by the strategy name the user and the configuration see
(memory.settings.STRATEGIES is these names and "none", no memory). A third design is one package with a
class that implements memory.design.MemoryDesign, and one entry here. Every design is built at each
session close, in this order, so switching strategy compares them on the same history.

Nothing is imported here at run time: memory.settings reads the names, and a design's package loads
when the agent first builds it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only
    from .design import MemoryClients, MemoryDesign
    from .settings import Settings


def _theanine(settings: Settings, clients: MemoryClients) -> MemoryDesign:
    from .theanine.strategy import TheanineMemory

    return TheanineMemory.from_clients(settings, clients)


def _secom(settings: Settings, clients: MemoryClients) -> MemoryDesign:
    from .secom.strategy import SecomMemory

    return SecomMemory.from_clients(settings, clients)


DesignFactory = Callable[["Settings", "MemoryClients"], "MemoryDesign"]

DESIGNS: dict[str, DesignFactory] = {"theanine": _theanine, "secom": _secom}
