"""The one error the engine raises for a user's mistake, re-exported so pages catch it while importing only ui."""
from engine.errors import EngineError

__all__ = ["EngineError"]
