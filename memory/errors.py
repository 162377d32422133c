"""One error base class for the memory library, with specific subclasses."""


class MemoryLibError(Exception):
    """Base class of every error the memory library raises on purpose."""


class LLMError(MemoryLibError):
    """The LLM could not give an answer (after retries)."""


class TransientLLMError(LLMError):
    """Rate limit, 5xx, timeout or dropped connection: worth retrying.

    `retry_after`: the seconds the server asked us to wait (its Retry-After header), if it said.
    """

    def __init__(self, message: str = "", retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class StoreUnavailable(MemoryLibError):
    """The vector store (e.g. a Chroma server) cannot be reached."""


class InvalidOptions(MemoryLibError, ValueError):
    """A setting is out of range; the message says which and why."""


class InvalidSetting(InvalidOptions):
    """An environment variable has a value the app cannot use; the message names it, the value and what is allowed."""
