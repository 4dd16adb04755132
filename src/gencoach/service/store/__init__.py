"""The live runs in Redis: events read from the stream, applied exactly once, read back.

("Graph" in gencoach means MAGMA's interaction graph: its records are `protocol.graph`, its
saves on disk `gencoach.graph`; this package keeps the runs still being generated.)
"""
