"""One TLS context per worker process, made before jobs fork from it.

Building an httpx client builds an SSL context (reading the CA bundle), about 0.1 s;
RQ runs every job in a fresh fork, so each job would pay it again. The worker process
makes the context once; forked jobs inherit it and their clients share it.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """The process's TLS context for outgoing HTTPS (certificates verified)."""
    return httpx.create_ssl_context()
