"""The board's defences: security headers, the Host check, the CSRF token, and notices.

Kept apart from the pages (`lambdajobs.board.app`) so that what guards every request is read in one
place: the headers every response carries (no framing, scripts from the board only), which Host
names are served (DNS rebinding), how a POST proves it came from a page of this board, and how an
action's outcome reaches the next page without putting request-controlled text into it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]


class SecurityHeaders:
    """Adds `SECURITY_HEADERS` to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, sending)


class LoopbackHosts:
    """Serves only requests whose Host header names one of `allowed` (any port; "*": any host).
    A page on another site that rebinds its DNS name to 127.0.0.1 sends its own name: refused (400).
    (Starlette's TrustedHostMiddleware cannot read an IPv6 literal such as `[::1]:8080`.)"""

    def __init__(self, app: ASGIApp, allowed: list[str]) -> None:
        self.app = app
        self.allowed = {name.lower() for name in allowed}

    @staticmethod
    def host_of(header: str) -> str:
        if header.startswith("["):  # an IPv6 literal, with its brackets
            return header.split("]", 1)[0] + "]"
        return header.rsplit(":", 1)[0] if ":" in header else header

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or "*" in self.allowed:
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if self.host_of(header).lower() in self.allowed:
            await self.app(scope, receive, send)
            return
        response = PlainTextResponse("Invalid host header", status_code=400)
        await response(scope, receive, send)


class Csrf:
    """One token per board process, derived from a random secret: every form carries it in a hidden
    field. Another site's page cannot read it (the same-origin policy), so it cannot forge a POST."""

    FIELD = "csrf"

    def __init__(self, secret: bytes | None = None) -> None:
        key = secret or secrets.token_bytes(32)
        self.token = hmac.new(key, b"lambdajobs board actions", hashlib.sha256).hexdigest()

    def valid(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


class Notices:
    """One-line outcomes of actions, kept server-side under a random key: an action redirects to
    `?notice=<key>` and the next page shows the line it stored. A key the board did not hand out shows
    nothing, so no link from elsewhere can put its own words in the board's banner."""

    KEEP = 256
    SECONDS = 600

    def __init__(self) -> None:
        self._kept: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, line: str) -> str:
        key = secrets.token_urlsafe(12)
        with self._lock:
            self._kept[key] = (time.monotonic(), line)
            while len(self._kept) > self.KEEP:
                self._kept.popitem(last=False)
        return key

    def get(self, key: str | None) -> str | None:
        if not key:
            return None
        with self._lock:
            found = self._kept.get(key)
        if found is None or time.monotonic() - found[0] > self.SECONDS:
            return None
        return found[1]


__all__ = ["LOOPBACK_HOSTS", "SECURITY_HEADERS", "Csrf", "LoopbackHosts", "Notices", "SecurityHeaders"]
