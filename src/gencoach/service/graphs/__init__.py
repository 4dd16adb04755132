"""Graph intake and store: events read from the stream, applied exactly once, read back."""
