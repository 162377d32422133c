"""Whether the Hugging Face hub can be reached, decided once before any model loads.

Offline (this project's default machines), libraries that try the hub retry for
tens of seconds before failing; with the hub marked offline they fail (or load
from the local cache) at once. Online (e.g. on Spaces), LLMLingua-2 downloads.
"""

from __future__ import annotations

import functools
import os
import socket


@functools.lru_cache(maxsize=1)
def configure_hub_access(host: str = "huggingface.co", timeout: float = 2.0) -> bool:
    """True when the hub is reachable; otherwise marks it offline for this process."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        online = False
    else:
        try:
            socket.create_connection((host, 443), timeout=timeout).close()
            online = True
        except OSError:
            online = False
    if not online:
        os.environ["HF_HUB_OFFLINE"] = "1"
        try:  # the constant is read at import time; gradio may have imported it already
            import huggingface_hub.constants as hc

            hc.HF_HUB_OFFLINE = True
        except ImportError:
            pass
    return online
