"""Stand-in for torch in the interop suite, for the import alone.

magma-core's graph and situation modules (which magma-gen's `SavedGraph` scoring,
`RemoteCoaching` and agent manager import) name `torch.Tensor` at import time, and
only test values against it at run time; nothing the suite runs computes with torch.
Installing torch (several GB) for that would make the suite slow to build, so this
module provides just the one class, never an instance.
"""


class Tensor:
    """Never instantiated: `isinstance(value, torch.Tensor)` is simply false."""
