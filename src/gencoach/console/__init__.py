"""The console: runs, coaching funnel, budgets and graphs in the browser, no build step."""

from gencoach.console.app import create_saves_app, mount_live_console

__all__ = ["create_saves_app", "mount_live_console"]
