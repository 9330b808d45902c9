"""The board's defences: security headers, the Host check, the CSRF token, the Origin check, and
notices.

Kept apart from the pages (`lambdajobs.board.app`) so that what guards every request is read in one
place: the headers every response carries (no framing, scripts from the board only), which Host
names are served (DNS rebinding), how a POST proves it came from a page of this board (a rotating
token in the form, and the browser's Origin naming the board itself), and how an action's outcome
reaches the next page without putting request-controlled text into it.
docs/how-to/board-security.md says the same for operators.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
#: A host name as `--allow-host` takes it: DNS labels (no wildcard, no port, no path).
_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
)

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    # "same-origin", not "no-referrer": under no-referrer a browser sends `Origin: null` with the
    # board's own forms, and the Origin check (`SameOrigin`) could not tell them from another site's.
    # No other site ever gets a Referer (a job id in a URL stays on the board).
    (b"referrer-policy", b"same-origin"),
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


def allowed_host_names(extra: Iterable[str] = ()) -> list[str]:
    """The Host names a board serves: the loopback names and `extra` (`--allow-host`), each a DNS
    name or an IP address, lower-cased (an IPv6 address in brackets). There is no wildcard: a name
    such as "*", or one with a port or a path, raises ValueError saying what is taken."""
    names = list(LOOPBACK_HOSTS)
    for given in extra:
        name = _host_name(given)
        if name not in names:
            names.append(name)
    return names


def _host_name(given: str) -> str:
    text = given.strip().lower().rstrip(".")
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        if _HOST_NAME.match(text) and not text.replace(".", "").isdigit():
            return text
        raise ValueError(
            f"allowed host {given!r}: give a host name or IP address the board is reached by "
            "(such as board.example.com or 10.0.0.5), with no port and no wildcard"
        ) from None
    return f"[{address.compressed}]" if address.version == 6 else address.compressed


class LoopbackHosts:
    """Serves only requests whose Host header names one of `allowed` (any port); there is no
    wildcard, so the check is on whatever address the board listens on. A page on another site
    that rebinds its DNS name to the board's address sends its own name: refused (400).
    (Starlette's TrustedHostMiddleware cannot read an IPv6 literal such as `[::1]:8080`.)"""

    def __init__(self, app: ASGIApp, allowed: list[str]) -> None:
        self.app = app
        self.allowed = set(allowed_host_names(allowed))

    @staticmethod
    def host_of(header: str) -> str:
        if header.startswith("["):  # an IPv6 literal, with its brackets
            return header.split("]", 1)[0] + "]"
        return header.rsplit(":", 1)[0] if ":" in header else header

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if self.host_of(header).lower() in self.allowed:
            await self.app(scope, receive, send)
            return
        response = PlainTextResponse("Invalid host header", status_code=400)
        await response(scope, receive, send)


class Csrf:
    """The token every form of the board carries in a hidden field, checked on every POST.

    Another site's page cannot read it (the same-origin policy), so it cannot forge a POST. It
    rotates: a token is an HMAC, under a random per-process key (or `secret`), of the current time
    window (`WINDOW_SECONDS`), and a POST is taken with the current window's token or the previous
    one's, so a page's forms stay good for one to two windows and a token that leaked (a saved page,
    a screenshot of the HTML) is useless after that. It needs no cookie and no server-side store, so
    a script without a browser can still act with a token read from a page. `SameOrigin` adds the
    browser's own word on where a POST comes from.
    """

    FIELD = "csrf"
    WINDOW_SECONDS = 3600

    def __init__(self, secret: bytes | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self._key = hmac.new(
            secret or secrets.token_bytes(32), b"lambdajobs board actions", hashlib.sha256
        ).digest()
        self.clock = clock

    def _for(self, window: int) -> str:
        return hmac.new(self._key, b"csrf window %d" % window, hashlib.sha256).hexdigest()

    def _window(self) -> int:
        return int(self.clock() // self.WINDOW_SECONDS)

    @property
    def token(self) -> str:
        """The token forms carry now."""
        return self._for(self._window())

    def valid(self, given: str | None) -> bool:
        """`given` is this window's token or the previous one's."""
        if not given:
            return False
        now = self._window()
        matches = [hmac.compare_digest(given.encode(), self._for(w).encode()) for w in (now, now - 1)]
        return any(matches)


class SameOrigin:
    """Refuses (403) a request that may change something (any method but GET, HEAD, OPTIONS) when the
    browser says it comes from elsewhere: its Origin header, or its Referer when it sends no Origin,
    names another host (and port) than the Host it was sent to, which `LoopbackHosts` already checked;
    `Origin: null` (a sandboxed frame, a page with no-referrer) is refused too. A request with neither
    header is not a browser's (every browser sends Origin with a POST): the CSRF token alone decides.
    Runs before the token is looked at, so a page elsewhere that somehow holds a valid token is still
    refused."""

    SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
    DEFAULT_PORTS = {"http": 80, "https": 443}

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in self.SAFE or self.same_origin(scope):
            await self.app(scope, receive, send)
            return
        response = PlainTextResponse(
            "Refused: this request comes from a page that is not this board's (its Origin or Referer "
            "names another site). Use the board's own page.",
            status_code=403,
        )
        await response(scope, receive, send)

    @staticmethod
    def same_origin(scope: Scope) -> bool:
        """The request's Origin (else Referer) names the host it was sent to: the same host name,
        and the same port when the Host header has one (a proxy in front may send none)."""
        headers = dict(scope["headers"])
        origin = headers.get(b"origin", headers.get(b"referer"))
        if origin is None:
            return True  # not a browser: the token decides
        host = urlsplit("//" + headers.get(b"host", b"").decode("latin-1"))
        sender = urlsplit(origin.decode("latin-1").strip())
        try:
            sender_port = sender.port or SameOrigin.DEFAULT_PORTS.get(sender.scheme)
            host_port = host.port
        except ValueError:  # a port that is not a number
            return False
        if not sender.hostname or sender.hostname != host.hostname:
            return False
        return host_port is None or sender_port == host_port


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


__all__ = [
    "LOOPBACK_HOSTS",
    "SECURITY_HEADERS",
    "Csrf",
    "LoopbackHosts",
    "Notices",
    "SameOrigin",
    "SecurityHeaders",
    "allowed_host_names",
]
