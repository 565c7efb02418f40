"""The run dashboard: a Starlette app with server-rendered pages and a little polling JavaScript.

Pages read the run directories (the source of truth) on every request, so a run written by another
process (`t2r run`, a resume started from here) shows up as it progresses. Every request that changes a file is a POST
carrying the page's token from our own origin (`guard.Guard`): feedback, through `submit_feedback`, the same function
the CLI uses, followed by a background `t2r resume`; Resume; and Export, which writes report.html. A GET never writes.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from text2reward.dashboard import code as codeview
from text2reward.dashboard.export import export_html
from text2reward.dashboard.files import inside, run_root
from text2reward.dashboard.guard import LOOPBACK_HOSTS, Guard
from text2reward.dashboard.launch import RECORD_FILE, Launcher
from text2reward.dashboard.render import STATIC, make_templates
from text2reward.dashboard.runview import LIVE_STATUSES, RunView, display_status, load_run, run_created, run_signature
from text2reward.errors import ConfigError
from text2reward.runs.human_feedback import submit_feedback
from text2reward.runs.records import RecordError
from text2reward.runs.statuses import RunStatus
from text2reward.runs.store import RunStore, list_runs

MAX_FORM_BYTES = 64 * 1024
MAX_AUTHOR = 80
TEXT_SUFFIXES = {".py", ".md", ".json", ".log", ".txt", ".csv", ".yml", ".yaml"}
CSP = ("default-src 'self'; img-src 'self' data:; media-src 'self' data:; style-src 'self' 'unsafe-inline'; "
       "script-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


class SecurityHeaders:
    """Adds a strict Content-Security-Policy: even a rendering mistake could not run an inline script."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                for name, value in ((b"content-security-policy", CSP), (b"x-content-type-options", "nosniff"),
                                    (b"referrer-policy", "same-origin"), (b"x-frame-options", "DENY")):
                    if name not in names:
                        headers.append((name, value.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


class Dashboard:
    """Request handlers over one runs directory. They are plain functions (Starlette runs them in a
    thread pool): they read files and SQLite, which must not stall the event loop serving videos."""

    def __init__(self, runs_dir: Path):
        self.runs_dir = Path(runs_dir)
        self.templates = make_templates()
        self.guard = Guard()
        self.launcher = Launcher()

    # --- helpers ---------------------------------------------------------------------------------------
    def render(self, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        html = self.templates.get_template(name).render(csrf_token=self.guard.token, **context)
        return HTMLResponse(html, status_code=status_code)

    def store(self, run_id: str) -> RunStore:
        root = run_root(self.runs_dir, run_id)
        if root is None:
            raise HTTPException(404, f"there is no run {run_id!r} in {self.runs_dir}")
        return RunStore(root)

    def launch_record(self, store: RunStore) -> tuple[dict[str, Any] | None, bool]:
        record = store.read_json(RECORD_FILE)
        alive = self.launcher.alive(store.run_id)
        if record is not None and not alive:
            code = self.launcher.exit_code(store.run_id)
            record = {**record, "exit_code": code}
        return record, alive

    def view(self, store: RunStore) -> RunView:
        record, alive = self.launch_record(store)

        def url_for(relative: str) -> str:
            return f"/runs/{quote(store.run_id)}/files/{quote(relative)}"

        return load_run(store, url_for, launch=record, launching=alive)

    def run_rows(self) -> list[dict[str, Any]]:
        rows = []
        for row in list_runs(self.runs_dir):
            root = run_root(self.runs_dir, row["run_id"])
            if root is None:
                continue
            run = RunStore(root)
            try:
                state = run.state()
                launching = self.launcher.alive(row["run_id"])
                status = display_status(run, launching)
            except RecordError as exc:  # one damaged run is marked, never hides the others
                rows.append({**row, "status": "damaged", "live": False, "author": "-", "damaged": str(exc), "tokens": 0,
                             "signature": str(exc)[:16]})
                continue
            rows.append({
                **row, "status": status, "live": status in LIVE_STATUSES,
                "created": run_created(run, state) or row["created"],
                "rounds_done": state.rounds_done, "best_success": state.best_success, "wall_seconds": state.wall_seconds,
                "author": row["author"] or row["backend"] or "-",
                "tokens": (row["prompt_tokens"] or 0) + (row["completion_tokens"] or 0),
                "signature": run_signature(root, launching),
            })
        return rows

    # --- pages -------------------------------------------------------------------------------------------
    def index(self, request: Request) -> Response:
        rows = self.run_rows()
        return self.render("runs.html", rows=rows, runs_dir=str(self.runs_dir), signature=_list_signature(rows))

    def runs_fragment(self, request: Request) -> Response:
        rows = self.run_rows()
        return self.render("_runs_table.html", rows=rows, runs_dir=str(self.runs_dir), signature=_list_signature(rows))

    def runs_json(self, request: Request) -> Response:
        rows = self.run_rows()
        return JSONResponse({"signature": _list_signature(rows), "runs": rows})

    def run_page(self, request: Request) -> Response:
        store = self.store(request.path_params["run_id"])
        return self.render("run.html", run=self.view(store), error=None, form=None, runs_dir=str(self.runs_dir))

    def run_fragment(self, request: Request) -> Response:
        store = self.store(request.path_params["run_id"])
        return self.render("_run_body.html", run=self.view(store), error=None, form=None, interactive=True,
                           files_base=f"/runs/{quote(store.run_id, safe='')}/files/", runs_dir=str(self.runs_dir))

    def run_status(self, request: Request) -> Response:
        store = self.store(request.path_params["run_id"])
        state = store.state()
        _, alive = self.launch_record(store)
        status = display_status(store, alive)
        return JSONResponse({
            "run_id": store.run_id, "status": status, "live": status in LIVE_STATUSES,
            "rounds_done": state.rounds_done, "best_success": state.best_success,
            "signature": run_signature(store.root, alive),
        })

    def run_file(self, request: Request) -> Response:
        """Serve a file of the run (videos with Range support, via FileResponse); nothing outside it."""
        root = run_root(self.runs_dir, request.path_params["run_id"])
        path = inside(root, request.path_params["path"]) if root else None
        if path is None:
            return Response("not found: only files inside the run directory are served", status_code=404, media_type="text/plain")
        if path.suffix in TEXT_SUFFIXES:
            media_type = "text/plain; charset=utf-8"
        else:
            media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return FileResponse(path, media_type=media_type, content_disposition_type="inline")

    async def export(self, request: Request) -> Response:
        body = await _read_limited(request, MAX_FORM_BYTES)
        return await run_in_threadpool(self.handle_export, request, body)

    def handle_export(self, request: Request, body: bytes | None) -> Response:
        """The Export button: (re)write report.html, then show it. A POST from our page only: it writes a file."""
        store = self.store(request.path_params["run_id"])
        fields = dict(parse_qsl((body or b"").decode("utf-8", errors="replace")))
        refused = self.guard.problem(request, fields.get("csrf_token"))
        if refused:
            return self.page_error(store, 403, refused, None)
        path = export_html(store)
        return RedirectResponse(f"/runs/{quote(store.run_id)}/files/{quote(store.relative(path))}", status_code=303)

    def pygments_css(self, request: Request) -> Response:
        return Response(codeview.stylesheet(), media_type="text/css")

    # --- feedback ----------------------------------------------------------------------------------------------
    async def feedback(self, request: Request) -> Response:
        body = await _read_limited(request, MAX_FORM_BYTES)
        return await run_in_threadpool(self.handle_feedback, request, body)

    def handle_feedback(self, request: Request, body: bytes | None) -> Response:
        store = self.store(request.path_params["run_id"])
        if body is None:
            return self.page_error(store, 413, f"the form is larger than {MAX_FORM_BYTES // 1024} KB; shorten the critique", None)
        if "application/x-www-form-urlencoded" not in request.headers.get("content-type", ""):
            return self.page_error(store, 415, "send the feedback form as application/x-www-form-urlencoded (the page's own form does)", None)
        fields = dict(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))
        form = {k: fields.get(k, "") for k in ("kind", "candidate", "best", "worst", "text", "author", "round")}
        refused = self.guard.problem(request, fields.get("csrf_token"))
        if refused:
            return self.page_error(store, 403, refused, form)
        author = form["author"].strip()
        try:
            if len(author) > MAX_AUTHOR:
                raise ConfigError(f"the name is {len(author)} characters; keep it under {MAX_AUTHOR}")
            if form["kind"] == "preference":
                event = submit_feedback(store, best=form["best"] or None, worst=form["worst"] or None,
                                        text=form["text"], author=author or None, source="dashboard")
            elif form["kind"] == "critique":
                event = submit_feedback(store, candidate=form["candidate"] or None, text=form["text"],
                                        author=author or None, source="dashboard")
            else:
                raise ConfigError("unknown feedback form; use the critique or the best/worst form on the run page")
        except ConfigError as exc:
            return self.page_error(store, 400, str(exc), form)
        try:
            self.launcher.start(store)
        except OSError as exc:
            message = (f"feedback #{event.id} was stored, but the next round could not start ({exc}); "
                       f"run `t2r resume {store.run_id} --runs-dir {self.runs_dir}`")
            return self.page_error(store, 500, message, None)
        return RedirectResponse(f"/runs/{quote(store.run_id)}#round-{event.for_round}", status_code=303)

    # --- resume an interrupted run -----------------------------------------------------------------------------
    async def resume(self, request: Request) -> Response:
        body = await _read_limited(request, MAX_FORM_BYTES)
        return await run_in_threadpool(self.handle_resume, request, body)

    def handle_resume(self, request: Request, body: bytes | None) -> Response:
        """The Resume button of an interrupted run: the same background `t2r resume` feedback starts."""
        store = self.store(request.path_params["run_id"])
        fields = dict(parse_qsl((body or b"").decode("utf-8", errors="replace")))
        refused = self.guard.problem(request, fields.get("csrf_token"))
        if refused:
            return self.page_error(store, 403, refused, None)
        if store.status() != RunStatus.INTERRUPTED:
            return self.page_error(store, 409, f"run {store.run_id} is {store.status().words}, not interrupted: "
                                   "there is nothing to resume", None)
        try:
            self.launcher.start(store)
        except OSError as exc:
            return self.page_error(store, 500, f"could not start the resume ({exc}); run "
                                   f"`t2r resume {store.run_id} --runs-dir {self.runs_dir}`", None)
        return RedirectResponse(f"/runs/{quote(store.run_id)}", status_code=303)

    def page_error(self, store: RunStore, status: int, message: str, form: dict[str, str] | None) -> HTMLResponse:
        return self.render("run.html", status_code=status, run=self.view(store), error=message, form=form,
                           runs_dir=str(self.runs_dir))


async def _read_limited(request: Request, limit: int) -> bytes | None:
    """The request body, or None once it passes `limit` bytes (read no further)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _list_signature(rows: list[dict[str, Any]]) -> str:
    return hashlib.sha1(json.dumps([(r["run_id"], r["signature"]) for r in rows]).encode()).hexdigest()[:16]


def create_app(runs_dir: Path, allowed_hosts: list[str] | None = None) -> Starlette:
    """The dashboard over `runs_dir`. Only loopback Host headers are accepted unless `allowed_hosts` says more."""
    dashboard = Dashboard(runs_dir)

    async def not_found(request: Request, exc: HTTPException) -> Response:
        return dashboard.render("error.html", status_code=exc.status_code, message=exc.detail)

    routes = [
        Route("/", dashboard.index),
        Route("/fragments/runs", dashboard.runs_fragment),
        Route("/api/runs", dashboard.runs_json),
        Route("/static/pygments.css", dashboard.pygments_css),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
        Route("/runs/{run_id}", dashboard.run_page),
        Route("/runs/{run_id}/fragment", dashboard.run_fragment),
        Route("/runs/{run_id}/status.json", dashboard.run_status),
        Route("/runs/{run_id}/export", dashboard.export, methods=["POST"]),
        Route("/runs/{run_id}/files/{path:path}", dashboard.run_file),
        Route("/runs/{run_id}/feedback", dashboard.feedback, methods=["POST"]),
        Route("/runs/{run_id}/resume", dashboard.resume, methods=["POST"]),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts or LOOPBACK_HOSTS), Middleware(SecurityHeaders)]
    # Starlette types every handler as taking Exception, though it calls this one with HTTPExceptions only
    app = Starlette(routes=routes, middleware=middleware, exception_handlers={HTTPException: not_found})  # type: ignore[dict-item]
    app.state.dashboard = dashboard
    return app


def serve(runs_dir: Path, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Run the dashboard with uvicorn; loopback only unless a host is given explicitly."""
    try:  # say what to do about a busy port in one line, before uvicorn logs a traceback
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise ConfigError(f"cannot listen on {host}:{port} ({reason}); pass another --port") from None
    loopback = host in LOOPBACK_HOSTS
    app = create_app(runs_dir, allowed_hosts=None if loopback else ["*"])
    shown = f"[{host}]" if ":" in host else host
    print(f"text2reward dashboard for {Path(runs_dir).resolve()} at http://{shown}:{port}/ (Ctrl-C stops it)")
    if not loopback:
        print("warning: the dashboard is reachable from other machines and can start training runs; it has no login")
    uvicorn.run(app, host=host, port=port, log_level="warning")  # background rounds outlive the server
