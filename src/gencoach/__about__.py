"""The package version, in one place for the build and the runtime."""

__version__ = "0.1.0"
