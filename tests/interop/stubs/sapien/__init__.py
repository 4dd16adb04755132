"""Stand-in for sapien in the interop suite, for the import alone.

magma-core's `simulation.data_structures.tools` names `sapien.Pose` in a type alias at
import time; nothing the suite runs simulates, so only the class name is needed.
"""


class Pose:
    """Never instantiated: referenced by a type alias only."""
