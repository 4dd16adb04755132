"""gencoach: asynchronous coaching orchestration for agent data generation."""

from gencoach.__about__ import __version__

__all__ = ["__version__"]
