"""`Client`: an `idgen serve` over HTTP, with `http.client` and nothing else."""

from __future__ import annotations

import http.client
import json
import re
import ssl
import threading
import time
import urllib.parse
from typing import Any, Callable, Literal, NamedTuple, cast, overload

from ._types import Decoded, ErrorCode, Layout

__all__ = ["Client", "IdgenError", "Response"]

_KINDS = ("snowflake", "uuidv7", "ulid")
_RETRY_AFTER = re.compile(r"[0-9]{1,6}")
# The errors of a connection reused after the service closed it while idle: tried again at
# once on a new connection, without counting as an attempt.
_STALE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


_never = threading.Event()


def _sleep(seconds: float) -> None:
    """`time.sleep`, or a timed wait where it fails (libfaketime 0.9.10 makes the
    `clock_nanosleep` of Python 3.11's `time.sleep` answer EINVAL)."""
    try:
        time.sleep(seconds)
    except OSError:
        _never.wait(seconds)


class IdgenError(Exception):
    """Any refusal of the service or of the generator.

    `status` is the HTTP status, for an answer of the service (None otherwise); `code` says
    what kind of refusal: `http`, `expired`, `lost`, `not-yet`, `clock-behind` or `closed`.
    """

    status: int | None
    code: ErrorCode

    def __init__(self, message: str, *, status: int | None = None, code: ErrorCode = "http") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class Response(NamedTuple):
    """An answer of the service: `status, headers, body = client.request(...)`."""

    status: int
    headers: http.client.HTTPMessage
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The body parsed as JSON (None for an empty body); ValueError if it is not JSON."""
        return json.loads(self.body) if self.body else None


def _retry_after(headers: http.client.HTTPMessage) -> float | None:
    """`Retry-After` in whole seconds, or None (an HTTP date is not honoured)."""
    value = headers.get("retry-after")
    if value is None or not _RETRY_AFTER.fullmatch(value.strip()):
        return None
    return float(int(value))


def _reason(response: Response) -> str:
    """The service's `{"error": ...}`, else the body's text."""
    try:
        parsed = response.json()
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
        return cast(str, parsed["error"])
    return response.body.decode("utf-8", "replace").strip()


def _check_number(name: str, value: object, *, positive: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"idgen: {name} must be a number; got {value!r}")
    if value < 0 or (positive and value == 0) or value != value:
        raise ValueError(f"idgen: {name} must be {'above' if positive else 'at least'} 0; got {value!r}")


class Client:
    """An `idgen serve` over HTTP.

    `token`: the lease API's bearer token (only the lease API needs it); `retries`: how many
    more times a 503 or a failed connection is tried (default 4); `backoff`: the first wait
    in seconds, doubled each time (default 0.1); `max_wait`: the longest single wait,
    `Retry-After` included (default 5 s); `timeout`: of each connection and read (10 s).
    A client may be shared by threads: each thread keeps its own keep-alive connection.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        retries: int = 4,
        backoff: float = 0.1,
        max_wait: float = 5.0,
        timeout: float = 10.0,
    ) -> None:
        if not isinstance(url, str):
            raise TypeError(f"idgen: the URL must be a string; got {url!r}")
        parts = urllib.parse.urlsplit(url.strip())
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"idgen: {url} is not an http(s) URL")
        if parts.query or parts.fragment:
            raise ValueError(f"idgen: {url}: the service's URL takes no query or fragment")
        if isinstance(retries, bool) or not isinstance(retries, int):
            raise TypeError(f"idgen: retries must be a whole number; got {retries!r}")
        if retries < 0:
            raise ValueError(f"idgen: retries must be at least 0; got {retries}")
        _check_number("backoff", backoff)
        _check_number("max_wait", max_wait)
        _check_number("timeout", timeout, positive=True)
        self._https = scheme == "https"
        self._host: str = parts.hostname
        self._port: int | None = parts.port  # ValueError for a bad port
        self._prefix = parts.path.rstrip("/")
        self._url = f"{scheme}://{parts.netloc}{self._prefix}"
        self._headers = {"accept": "application/json"}
        if token is not None:
            if not isinstance(token, str):
                raise TypeError("idgen: the token must be a string")
            self._headers["authorization"] = f"Bearer {token.strip()}"
        self._retries = retries
        self._backoff = float(backoff)
        self._max_wait = float(max_wait)
        self._timeout = float(timeout)
        self._local = threading.local()
        self._ssl: ssl.SSLContext | None = None

    @property
    def url(self) -> str:
        """The service's base URL."""
        return self._url

    @property
    def timeout(self) -> float:
        return self._timeout

    def __repr__(self) -> str:
        return f"Client({self._url!r})"

    def _connection(self, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection, and whether it is open already (reused)."""
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._https:
                if self._ssl is None:
                    self._ssl = ssl.create_default_context()
                conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl)
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
            self._local.conn = conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
            return conn, True
        return conn, False

    def _send(self, method: str, target: str, data: bytes | None, headers: dict[str, str], timeout: float) -> Response:
        conn, reused = self._connection(timeout)
        try:
            try:
                conn.request(method, target, body=data, headers=headers)
                answer = conn.getresponse()
            except _STALE:
                if not reused:
                    raise
                conn.close()
                conn.request(method, target, body=data, headers=headers)
                answer = conn.getresponse()
            body = answer.read()
        except BaseException:
            conn.close()
            raise
        return Response(answer.status, answer.headers, body)

    def close(self) -> None:
        """Closes this thread's connection (another request opens a new one)."""
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        retries: int | None = None,
        timeout: float | None = None,
    ) -> Response:
        """A request (`path` under the service's URL, `body` sent as JSON unless None).

        Tried again on 503 (after `Retry-After` when given, else the backoff, doubling) and on
        a failed connection, at most `retries` more times (the client's unless given); each
        attempt may take `timeout` seconds (the client's unless given). Returns the answer of
        any other status, or the last 503; a connection still failing raises an IdgenError
        (code `http`, no status).
        """
        return self._timed_request(method, path, body, retries=retries, timeout=timeout)[0]

    def _timed_request(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        retries: int | None = None,
        timeout: float | None = None,
        monotonic_ns: Callable[[], int] = time.monotonic_ns,
    ) -> tuple[Response, int, int]:
        """`request`, and when (read from `monotonic_ns`: a generator's `clock.monotonic_ns`)
        the attempt that was answered was sent and when its answer came: the service read its
        clock between the two. The waits between attempts stay real time."""
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        tries = self._retries if retries is None else retries
        limit = self._timeout if timeout is None else timeout
        wait = self._backoff
        target = self._prefix + path
        attempt = 0
        while True:
            sent_ns = monotonic_ns()
            try:
                response = self._send(method, target, data, headers, limit)
            except (OSError, http.client.HTTPException) as error:
                if attempt >= tries:
                    raise IdgenError(f"idgen: {method} {path}: {str(error) or type(error).__name__}") from error
                delay = wait
            else:
                if response.status != 503 or attempt >= tries:
                    return response, sent_ns, monotonic_ns()
                asked = _retry_after(response.headers)
                delay = wait if asked is None else asked
            _sleep(min(delay, self._max_wait))
            wait *= 2
            attempt += 1

    def _json(self, method: str, path: str, body: object = None) -> Any:
        """The JSON answer of a request, or an IdgenError with the service's reason."""
        response = self.request(method, path, body)
        if not response.ok:
            raise IdgenError(
                f"idgen: {method} {path}: {response.status} {_reason(response)}", status=response.status
            )
        try:
            return response.json()
        except ValueError:
            raise IdgenError(
                f"idgen: {method} {path}: the answer ({response.status}) is not JSON", status=response.status
            ) from None

    @overload
    def ids(self, count: int, kind: Literal["snowflake"] = "snowflake") -> list[int]: ...

    @overload
    def ids(self, count: int, kind: Literal["uuidv7", "ulid"]) -> list[str]: ...

    @overload
    def ids(self, count: int, kind: str) -> list[int] | list[str]: ...

    def ids(self, count: int, kind: str = "snowflake") -> list[int] | list[str]:
        """`count` IDs of `kind`, increasing: Snowflake IDs as `int`, UUIDv7s and ULIDs as `str`."""
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(f"idgen: count must be a whole number; got {count!r}")
        if count < 1:
            raise ValueError(f"idgen: count must be a whole number from 1; got {count}")
        if not isinstance(kind, str):
            raise TypeError(f"idgen: kind must be a string; got {kind!r}")
        if kind not in _KINDS:
            raise ValueError(f"idgen: kind must be snowflake, uuidv7 or ulid; got {kind!r}")
        answer = self._json("POST", "/v1/ids", {"count": count, "kind": kind})
        raw = answer.get("ids") if isinstance(answer, dict) else None
        if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
            raise IdgenError("idgen: POST /v1/ids: the answer holds no list of IDs", status=200)
        texts = cast(list[str], raw)
        if kind != "snowflake":
            return texts
        ids: list[int] = []
        for text in texts:
            # Decimal digits only: never through float, and no sign, space or underscore.
            if not (text.isascii() and text.isdigit()):
                raise IdgenError(f"idgen: POST /v1/ids: {text!r} is not a Snowflake ID", status=200)
            ids.append(int(text))
        return ids

    def decode(self, id: int | str) -> Decoded:
        """What an ID says: kind, creation time and, for a Snowflake ID, its node and sequence."""
        if isinstance(id, bool) or not isinstance(id, (int, str)):
            raise TypeError(f"idgen: an ID is an int or a str; got {id!r}")
        answer = self._json("GET", f"/v1/ids/{urllib.parse.quote(str(id), safe='')}/decode")
        if not isinstance(answer, dict):
            raise IdgenError("idgen: decode: the answer is not an object", status=200)
        return cast(Decoded, answer)

    def layout(self) -> Layout:
        """The layout the service's Snowflake IDs follow."""
        answer = self._json("GET", "/v1/layout")
        if not isinstance(answer, dict):
            raise IdgenError("idgen: layout: the answer is not an object", status=200)
        return cast(Layout, answer)
