"""Source adapters: the build step that normalizes sources into canonical records.

One adapter per kind of source (`saves`: MAGMA-GEN 2.0 save folders, `chat`: chat JSONL
files), on the interface of `base`. Only the builder imports this package; the consumer
side never does.
"""
