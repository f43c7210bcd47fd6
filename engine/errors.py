"""One exception type for every mistake a user can make; its message is shown as-is (no traceback)."""


class EngineError(ValueError):
    """A problem with the user's input or environment, explained in one or two plain sentences."""
