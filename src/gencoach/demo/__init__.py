"""`gencoach demo`: every part of gencoach started, driven and stopped on one machine."""

from gencoach.demo.run import DemoOptions, run_demo

__all__ = ["DemoOptions", "run_demo"]
