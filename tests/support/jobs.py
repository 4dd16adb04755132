"""Job functions RQ workers import by name in tests."""


def add(left: int, right: int) -> int:
    """Return the sum, so a test can see a job ran."""
    return left + right
