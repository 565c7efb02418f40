"""The run dashboard: watch rollouts, read and compare reward code, critique or pick rewards, refine.

`t2r dashboard` serves it on 127.0.0.1; `create_app` builds the Starlette app (used by tests).
Imports are lazy so that the HTML export (which shares the page templates) needs no web server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def create_app(runs_dir: Path, allowed_hosts: list[str] | None = None) -> Any:
    from text2reward.dashboard.app import create_app as build  # Starlette: the HTML export shares this package, not the server

    return build(runs_dir, allowed_hosts=allowed_hosts)


def serve(runs_dir: Path, host: str = "127.0.0.1", port: int = 8765) -> None:
    from text2reward.dashboard.app import serve as run_server  # Starlette and uvicorn: `t2r dashboard` only

    run_server(runs_dir, host=host, port=port)


__all__ = ["create_app", "serve"]
