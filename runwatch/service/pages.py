"""serve's own web pages (`GET /`, `/ui/...`): the runs, an incident, a run's timeline,
the silences -- server-rendered HTML, no build step, nothing from the network (one small
script of ours: the reload that waits while a form is filled in).

Built on the JSON API: every page reads (and every form writes) through the same endpoints
`runwatch` and `curl` use (`/v1/runs`, `/v1/alerts`, ...), called in process by the `api`
the HTTP front hands in, so a page shows what the API answers and no second path to the
state exists.

Access. A browser cannot send the API's bearer header, so when serve has a token the pages
ask for it once (`/ui/login`) and keep a session cookie (HttpOnly, SameSite=Strict) whose
value is derived from the token (an HMAC, so the cookie is not the token). A form that
changes state (silences, resume) also carries a form token bound to the session (CSRF), and
a POST from another origin is refused. Every answer forbids inline styles, framing, plugins
and every script but the one it carries itself (Content-Security-Policy: that script's
nonce, new with each answer: `page_layout.REFRESH_JS`, the live pages' reload) -- the second
wall behind the pages' escaping (`runwatch.service.markup`).
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import secrets
from argparse import ArgumentTypeError
from collections.abc import Callable, Iterable
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qs, quote

from runwatch.service import page_forms, page_incident
from runwatch.service import page_views as views
from runwatch.service.markup import Markup, link, path_part
from runwatch.service.page_layout import REFRESH_S, RUN_REFRESH_S, STYLE, page

log = logging.getLogger("runwatch.serve")

#: (method, path with its query, body) -> (status, the JSON answer): the service's API.
Api = Callable[[str, str, bytes], tuple[int, Any]]
StartResponse = Callable[[str, list[tuple[str, str]]], Any]

COOKIE = "runwatch_session"
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = [
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    # not no-referrer: with it a browser sends `Origin: null` with a form, and ours are refused
    ("Referrer-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
]
MAX_FORM = 64 << 10


class Answer:
    """A page's answer: status, body, headers beyond the security ones."""

    def __init__(
        self,
        status: int,
        body: bytes = b"",
        ctype: str = "text/html; charset=utf-8",
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        self.status, self.body, self.ctype = status, body, ctype
        self.headers = headers or []
        self.nonce = ""  # the one script the page may run: the one given this nonce

    def csp(self) -> str:
        return CSP + (f"; script-src 'nonce-{self.nonce}'" if self.nonce else "")


def through(answer: Callable[[dict[str, Any]], tuple[int, bytes, str]], token: str | None) -> Api:
    """The API as the pages call it: `answer` (the HTTP front's) given a request of ours,
    with the token -- the same endpoints and checks as any client's request."""

    def call(method: str, path: str, body: bytes) -> tuple[int, Any]:
        path, _, query = path.partition("?")
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.input": io.BytesIO(body),
            "HTTP_AUTHORIZATION": f"Bearer {token}" if token else "",
        }
        status, out, _ = answer(environ)
        return status, json.loads(out)

    return call


def handles(path: str) -> bool:
    """Whether `path` is one of the pages' (the rest is the API's)."""
    return path in ("/", "/favicon.ico") or path.startswith("/ui/")


def _wsgi_text(path: str) -> str:
    """PATH_INFO (bytes as latin-1, WSGI's way) as the text it spells (UTF-8)."""
    return path.encode("latin-1").decode("utf-8", "replace")


def _api_path(path: str) -> str:
    """Our text path in WSGI's form, as the API's PATH_INFO."""
    return path.encode("utf-8").decode("latin-1")


class Pages:
    """The pages as a WSGI application over `api`; `clock` is the service's wall clock."""

    def __init__(self, api: Api, token: str | None, clock: Callable[[], float]) -> None:
        self.api, self.token, self.clock = api, token, clock
        # the form tokens' key: the token (forms outlive a restart), else this process's own
        self._key = token.encode() if token else secrets.token_bytes(32)

    # -- the session and the form token ----------------------------------------------------

    def _session_for_token(self) -> str:
        assert self.token
        return hmac.new(self.token.encode(), b"runwatch page session", hashlib.sha256).hexdigest()

    def _session(self, environ: dict[str, Any]) -> str | None:
        """The session cookie's value when it is a valid one, else None."""
        cookie = SimpleCookie()
        try:
            cookie.load(str(environ.get("HTTP_COOKIE", "")))
        except CookieError:
            return None
        morsel = cookie.get(COOKIE)
        value = morsel.value if morsel is not None else ""
        if self.token:
            return value if hmac.compare_digest(value, self._session_for_token()) else None
        return value if len(value) == 64 and all(c in "0123456789abcdef" for c in value) else None

    def csrf(self, session: str) -> str:
        return hmac.new(self._key, b"form|" + session.encode(), hashlib.sha256).hexdigest()

    @staticmethod
    def _cookie(value: str, max_age: int | None = None) -> tuple[str, str]:
        age = f"; Max-Age={max_age}" if max_age is not None else ""
        return ("Set-Cookie", f"{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict{age}")

    # -- WSGI ------------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        try:
            answer = self.answer(environ)
        except Exception as err:  # answer, and keep serving
            log.exception("runwatch serve: page %s failed", environ.get("PATH_INFO"))
            answer = self._error(500, f"internal error: {type(err).__name__}")
        headers = [
            ("Content-Type", answer.ctype),
            ("Content-Length", str(len(answer.body))),
            ("Content-Security-Policy", answer.csp()),
            *SECURITY_HEADERS,
            *answer.headers,
        ]
        start_response(f"{answer.status} {HTTPStatus(answer.status).phrase}", headers)
        return [answer.body]

    def answer(self, environ: dict[str, Any]) -> Answer:
        method = environ["REQUEST_METHOD"]
        path = _wsgi_text(environ.get("PATH_INFO", ""))
        if path == "/ui/style.css":
            return Answer(200, STYLE.encode(), "text/css; charset=utf-8")
        if path == "/favicon.ico":  # asked by every browser: no icon, and no 401 counted
            return Answer(204)
        if method == "POST":
            return self._post(environ, path)
        if method not in ("GET", "HEAD"):
            return self._error(405, f"method {method} not allowed")
        session = self._session(environ)
        new_cookie: list[tuple[str, str]] = []
        if session is None:
            if self.token:
                return self._login(path, environ, wrong=False)
            session = secrets.token_hex(32)  # only what binds the forms to this browser
            new_cookie.append(self._cookie(session))
        if path == "/ui/login":
            return Answer(303, headers=[("Location", "/")])
        query = parse_qs(environ.get("QUERY_STRING", ""))
        answer = self._get(path, query, session)
        answer.headers += new_cookie
        return answer

    def _html(
        self,
        status: int,
        title: str,
        main: Markup,
        session: str | None = None,
        refresh: int | None = None,
    ) -> Answer:
        nonce = secrets.token_urlsafe(18) if refresh else ""
        body = page(
            title,
            main,
            now=self.clock(),
            refresh=refresh,
            signed_in=bool(self.token and session),
            csrf=self.csrf(session or ""),
            nonce=nonce,
        )
        answer = Answer(status, body)
        answer.nonce = nonce
        return answer

    def _error(self, status: int, message: str, session: str | None = None) -> Answer:
        return self._html(status, str(status), page_forms.error_view(status, message), session)

    def _read(self, path: str) -> tuple[int, Any]:
        return self.api("GET", _api_path(path), b"")

    def _get(self, path: str, query: dict[str, list[str]], session: str) -> Answer:
        now = self.clock()
        if path == "/":
            runs = self._read("/v1/runs")[1]["runs"]
            alerts = self._read("/v1/alerts")[1]
            firing = self._read("/v1/alerts?state=firing")[1]["alerts"]
            main = views.runs_view(
                runs,
                firing,
                alerts["incidents"],
                alerts["alerts"],
                views.RunFilter.from_query(query),
                now,
            )
            return self._html(200, "runs", main, session, refresh=REFRESH_S)
        if path.startswith("/ui/runs/"):
            return self._run_page(path[len("/ui/runs/") :], session, now)
        if path == "/ui/silences":
            return self._silences_page(session, query=query)
        if path.startswith("/ui/incidents/"):
            return self._incident_page(path[len("/ui/incidents/") :], session, now)
        return self._error(404, f"no such page: {path}", session)

    def _run_page(self, run: str, session: str, now: float) -> Answer:
        status, found = self._read("/v1/runs/" + run)
        got, history = self._read("/v1/history/runs/" + run)  # as `runwatch show` prints it
        timeline = history if got == 200 else None
        missing = None if got == 200 else str(history.get("error", f"the API answered {got}"))
        if status == 404 and timeline is not None:  # no longer live: as the history has it
            found = views.run_from_history(timeline)
        elif status != 200:
            return self._error(status, str(found.get("error", "")), session)
        incidents = self._read("/v1/alerts")[1]["incidents"]
        mine = [i for i in incidents if i["run"] == run]
        live, breaker = self._read("/v1/breaker/" + run)
        resume = page_forms.resume_form(run, breaker if live == 200 else {}, self.csrf(session))
        main = views.run_view(found, mine, timeline, now, resume, missing)
        return self._html(200, f"run {run}", main, session, refresh=RUN_REFRESH_S)

    def _incident_page(self, ident: str, session: str, now: float) -> Answer:
        parts = ident.split("|")
        if len(parts) < 3 or parts[0] != "incident":
            return self._error(404, f"no incident {ident!r}: ids are incident|RUN|N", session)
        run = "|".join(parts[1:-1])
        status, found = self._read("/v1/runs/" + run)
        alerts = self._read("/v1/alerts")[1]
        seen = {a["id"]: a for a in alerts["alerts"]}
        if status == 200:
            seen.update((a["id"], a) for a in found["transitions"])
        live = next((i for i in alerts["incidents"] if i["id"] == ident), None)
        main = page_incident.incident_view(ident, list(seen.values()), live, now)
        if main is None:  # gone from what the service holds: as the history keeps it
            got, history = self._read("/v1/history/runs/" + run)
            if got == 200:
                main = page_incident.incident_from_history(ident, history, now)
        if main is None:
            return self._error(404, f"no incident {ident!r} in what this service holds", session)
        return self._html(200, f"incident {ident}", main, session, refresh=REFRESH_S)

    # -- forms -----------------------------------------------------------------------------

    def _login(self, path: str, environ: dict[str, Any], wrong: bool) -> Answer:
        nxt = path if path != "/ui/login" else "/"
        if environ.get("QUERY_STRING") and path != "/ui/login":
            nxt += "?" + str(environ["QUERY_STRING"])
        return self._html(401, "sign in", page_forms.login_view(nxt, wrong))

    def _post(self, environ: dict[str, Any], path: str) -> Answer:
        origin = environ.get("HTTP_ORIGIN")
        host = environ.get("HTTP_HOST", "")
        if origin is not None and origin not in (f"http://{host}", f"https://{host}"):
            return self._error(403, "a form from another site: refused")
        length = str(environ.get("CONTENT_LENGTH") or "0")
        size = int(length) if length.isascii() and length.isdigit() else 0
        if size > MAX_FORM:
            return self._error(413, f"a form over {MAX_FORM} bytes")
        form: dict[str, list[str]] = parse_qs(
            environ["wsgi.input"].read(size).decode("utf-8", "replace")
        )

        def field(name: str) -> str:
            return (form.get(name) or [""])[0]

        if path == "/ui/login":
            return self._sign_in(field("token"), field("next"), environ)
        session = self._session(environ)
        if session is None:
            return self._error(401, "sign in first (the session cookie is missing or old)")
        if not hmac.compare_digest(field("csrf"), self.csrf(session)):
            return self._error(403, "the form is stale or not ours: reload the page", session)
        if path == "/ui/logout":
            return Answer(303, headers=[("Location", "/"), self._cookie("", max_age=0)])
        if path == "/ui/silences":
            return self._add_silence(field, session)
        if path.startswith("/ui/silences/") and path.endswith("/remove"):
            ident = path[len("/ui/silences/") : -len("/remove")]
            status, said = self.api("DELETE", _api_path("/v1/silences/" + ident), b"")
            if status != 200:
                return self._silences_page(session, said.get("error", ""), status)
            return _see(link("/ui/silences", removed=ident))
        if path.startswith("/ui/runs/") and path.endswith("/resume"):
            run = path[len("/ui/runs/") : -len("/resume")]
            asked = {"run": run, "by": f"runwatch page ({environ.get('REMOTE_ADDR', '?')})"}
            if field("reason").strip():
                asked["reason"] = field("reason").strip()[:200]
            status, said = self.api("POST", "/v1/resume", json.dumps(asked).encode())
            if status != 200:
                return self._error(status, str(said.get("error", "")), session)
            return _see("/ui/runs/" + path_part(run))
        return self._error(404, f"no such form: {path}", session)

    def _add_silence(self, field: Callable[[str], str], session: str) -> Answer:
        from runwatch.commands.silence import parse_duration

        try:
            seconds = parse_duration(field("for"))
        except ArgumentTypeError as err:
            return self._silences_page(session, str(err), 400)
        asked = {"run": field("run").strip(), "rule": field("rule").strip() or None,
                 "for_s": seconds, "comment": field("comment").strip()}  # fmt: skip
        status, said = self.api("POST", "/v1/silences", json.dumps(asked).encode())
        if status not in (200, 201):
            return self._silences_page(session, str(said.get("error", "")), status)
        return _see(link("/ui/silences", added=str(said["silence"]["id"])))

    def _silences_page(
        self,
        session: str,
        problem: str = "",
        status: int = 200,
        query: dict[str, list[str]] | None = None,
    ) -> Answer:
        got, found = self._read("/v1/silences")
        listed = found.get("silences") if got == 200 else None
        missing = None if got == 200 else str(found.get("error", f"the API answered {got}"))
        runs = sorted(str(r["run"]) for r in self._read("/v1/runs")[1]["runs"])
        said = ""
        for key, text in (("added", "silence {} set"), ("removed", "silence {} removed")):
            value = ((query or {}).get(key) or [""])[0]
            if value.isascii() and value.isdigit():
                said = text.format(value)
        main = page_forms.silences_view(
            listed, missing, runs, self.csrf(session), self.clock(), said=said, problem=problem
        )
        return self._html(status, "silences", main, session)

    def _sign_in(self, token: str, nxt: str, environ: dict[str, Any]) -> Answer:
        if not self.token:
            return Answer(303, headers=[("Location", "/")])
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            return self._html(401, "sign in", page_forms.login_view(nxt, wrong=True))
        # only a path of ours: never a redirect to another site (//evil, /\evil)
        safe = nxt if nxt.startswith("/") and not nxt.startswith(("//", "/\\")) else "/"
        return Answer(
            303,
            headers=[
                ("Location", quote(safe, safe="/?=&%:|@+,;-._~")),
                self._cookie(self._session_for_token()),
            ],
        )


def _see(location: str) -> Answer:
    """After a form: to the page that shows what it did (303: a reload does not resend)."""
    return Answer(303, headers=[("Location", location)])
