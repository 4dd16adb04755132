"""Write the controller's OpenAPI document (what `gencoach serve` answers) to docs/openapi.json.

Run with `make openapi`; `tests/docs/test_openapi.py` checks the committed file is current.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from gencoach.config import Settings
from gencoach.console import mount_live_console
from gencoach.service.web.api import ApiContext, create_app

TARGET = Path(__file__).resolve().parent.parent / "docs" / "openapi.json"


def document() -> dict[str, Any]:
    """The OpenAPI document of a controller with the live console mounted, as it serves it."""
    settings = Settings()
    # Building the routes touches none of the context's services, only serving them does.
    # The token's value does not show in the document; its presence keeps auth routes alike.
    context = ApiContext(*([None] * 8), token="placeholder")  # type: ignore[arg-type]  # noqa: S106
    app: FastAPI = create_app(context)
    mount_live_console(app, context, settings, "redis://127.0.0.1:6379/0")
    return app.openapi()


def render() -> str:
    """The document as the committed file holds it: sorted keys, two-space indents."""
    return json.dumps(document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    TARGET.write_text(render())
    sys.stdout.write(f"wrote {TARGET}\n")
