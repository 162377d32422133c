"""Whether the Hugging Face hub can be reached, decided once before any model loads.

Offline (this project's default machines), libraries that try the hub retry for
tens of seconds before failing; with the hub marked offline they fail (or load
from the local cache) at once. Online (e.g. on Spaces), LLMLingua-2 downloads.

The switch is huggingface_hub's own (`constants.HF_HUB_OFFLINE`, which it reads from HF_HUB_OFFLINE
at import and checks before every request, transformers' downloads included): the process's
environment is left as it is.
"""

from __future__ import annotations

import functools
import socket


@functools.lru_cache(maxsize=1)
def configure_hub_access(host: str = "huggingface.co", timeout: float = 2.0) -> bool:
    """True when the hub is reachable; otherwise marks it offline for this process."""
    try:
        import huggingface_hub.constants as hc
    except ImportError:  # no library that could download is installed
        return False
    if hc.HF_HUB_OFFLINE:  # HF_HUB_OFFLINE=1 in the environment
        return False
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        hc.HF_HUB_OFFLINE = True
        return False
