"""Request checks for the dashboard's one state-changing action (posting feedback).

Why both a token and an Origin/Referer check: a page on another site can make a browser POST to
127.0.0.1 (the dashboard starts training processes), but it can neither read our token nor forge
the browser's Origin header. The Host check stops DNS-rebinding pages from reaching a loopback server.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from starlette.requests import Request

LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]


@dataclass
class Guard:
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def problem(self, request: Request, sent_token: str | None) -> str | None:
        """None when the POST is same-origin and carries our token; otherwise why it was refused."""
        own = f"{request.url.scheme}://{request.headers.get('host', '')}".lower()
        origin = request.headers.get("origin")
        referer = request.headers.get("referer")
        if origin is not None:
            if origin.lower() != own:
                return f"cross-origin request refused (Origin {origin!r} is not {own!r}); submit the form from the dashboard page"
        elif referer:
            parts = urlsplit(referer)
            if f"{parts.scheme}://{parts.netloc}".lower() != own:
                return "cross-origin request refused (the Referer is another site); submit the form from the dashboard page"
        if not sent_token or not hmac.compare_digest(sent_token.encode(), self.token.encode()):
            return "the form's security token is missing or stale; reload the page and submit again"
        return None
