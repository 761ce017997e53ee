"""HTTP client of the coordinator (docs/migration.md "HTTP API").

CoordinatorClient is safe to use from several threads (each call opens its own
connection). Calls never block longer than `timeout` per attempt; a coordinator that
cannot be reached raises Unavailable, any HTTP status is returned to the caller.
"""
from __future__ import annotations

import http.client
import json
import random
import time
import urllib.parse
from typing import Any, Callable, Optional, Tuple

# (HTTP status, decoded JSON body or None)
Response = Tuple[int, Any]


class Unavailable(ConnectionError):
    """The coordinator could not be reached (down, restarting, network)."""


class CoordinatorClient:
    def __init__(self, base_url: str, timeout: float = 0.5) -> None:
        u = urllib.parse.urlsplit(base_url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError("coordinator address must look like http://HOST:PORT (got %r)" % base_url)
        self.host = u.hostname
        self.port = u.port or 80
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None, timeout: Optional[float] = None) -> Response:
        """One request: (status, decoded JSON or None). Raises Unavailable."""
        data = None if body is None else json.dumps(body).encode()
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout or self.timeout)
        try:
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            status = resp.status
        except (OSError, http.client.HTTPException) as e:
            raise Unavailable("coordinator %s:%d: %s %s failed: %s"
                              % (self.host, self.port, method, path, e)) from None
        finally:
            conn.close()
        try:
            decoded = json.loads(raw.decode()) if raw else None
        except ValueError:
            decoded = {"raw": raw[:200].decode(errors="replace")}
        return status, decoded

    def call_retrying(self, method: str, path: str, body: Any = None, deadline_s: Optional[float] = None,
                      stop: Optional[Callable[[], bool]] = None) -> Response:
        """call(), retried with exponential backoff (20 ms .. 1 s, jittered) while the
        coordinator is unreachable; gives up after deadline_s (None: never) or when
        stop() returns true, raising Unavailable."""
        delay = 0.02
        start = time.monotonic()
        while True:
            try:
                return self.call(method, path, body)
            except Unavailable:
                if deadline_s is not None and time.monotonic() - start + delay > deadline_s:
                    raise
                if stop is not None and stop():
                    raise
            time.sleep(delay * (0.5 + random.random() / 2))
            delay = min(delay * 2, 1.0)

    # The calls of docs/migration.md.
    def register(self, body: dict) -> Response:
        return self.call_retrying("POST", "/v1/register", body)

    def plan(self, member: str, wait_s: Optional[float] = None, generation: Optional[int] = None) -> Response:
        """GET /v1/plan. With wait_s, a long poll: the coordinator may hold the request
        up to wait_s until the plan is news for a member that last formed `generation`
        (a reply it held carries "held_ms"; a coordinator without long polls answers
        at once)."""
        path = "/v1/plan?member=" + urllib.parse.quote(member)
        if not wait_s:
            return self.call("GET", path)
        path += "&wait_ms=%d&generation=%d" % (int(wait_s * 1000), -1 if generation is None else generation)
        return self.call("GET", path, timeout=self.timeout + wait_s)

    def heartbeat(self, body: dict) -> Response:
        return self.call("POST", "/v1/heartbeat", body)

    def report(self, body: dict) -> Response:
        return self.call("POST", "/v1/report", body)

    def migrate(self, body: dict) -> Response:
        """POST /v1/migrations: {rank, kind: planned|preemptive, reason}."""
        return self.call("POST", "/v1/migrations", body)
