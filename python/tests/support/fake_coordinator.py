"""A minimal in-process coordinator for unit tests: speaks the HTTP API of
docs/migration.md for one job of world size N; every report starts a new generation with
the same members. Records every request. Thread-safe (one lock); stop() makes it
unreachable. With hold_polls set, every long poll (GET /v1/plan with wait_ms) is held
until the test answers it with release(); otherwise wait_ms is ignored, as by a
coordinator without long polls."""
import http.server
import json
import threading
import urllib.parse


class FakeCoordinator:
    def __init__(self, world_size=1):
        self.world_size = world_size
        self.lock = threading.Lock()
        self.members = {}        # member -> register body
        self.requests = []       # (method, path, body)
        self.directive = {"directive": "none"}
        self.resume_step = 0
        self.generation = 0      # bumped by every report (a fresh generation, same members)
        self.hold_polls = False
        self.held = []           # long polls held: {"query", "event", "reply"}, in arrival order
        self.cond = threading.Condition(self.lock)
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _reply(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                u = urllib.parse.urlsplit(self.path)
                q = urllib.parse.parse_qs(u.query)
                with fake.lock:
                    fake.requests.append(("GET", u.path, q))
                    fake.cond.notify_all()
                    if not (fake.hold_polls and "wait_ms" in q):
                        self._reply(*fake.plan(q.get("member", [""])[0]))
                        return
                    slot = {"query": q, "event": threading.Event(), "reply": None}
                    fake.held.append(slot)
                    fake.cond.notify_all()
                slot["event"].wait(60)
                self._reply(200, slot["reply"] or {"generation": -1, "action": "wait", "reason": "held"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.requests.append(("POST", self.path, body))
                    fake.cond.notify_all()
                    if self.path == "/v1/register":
                        fake.members[body["member"]] = body
                        self._reply(200, {"generation": 0})
                    elif self.path == "/v1/heartbeat":
                        self._reply(200, dict(fake.directive, generation=fake.generation))
                    elif self.path == "/v1/report":
                        fake.generation += 1
                        fake.resume_step = body["committed_step"]
                        self._reply(200, {})
                    else:
                        self._reply(200, {})

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def plan(self, member):
        if member not in self.members:
            return 404, {"error": "unknown member"}
        ranks = sorted(self.members.values(), key=lambda b: b.get("rank", 1 << 30))
        if len(ranks) < self.world_size:
            return 200, {"generation": self.generation, "action": "wait", "reason": "waiting for ranks"}
        host = ranks[0]
        g = self.generation
        return 200, {"generation": g, "action": "train", "rank": self.members[member]["rank"],
                     "world_size": self.world_size, "members": [b["member"] for b in ranks],
                     "store": {"host": host["host"], "port": host["store_port"], "prefix": "g%d/" % g},
                     "src_rank": 0, "resume_step": self.resume_step, "reason": "generation %d" % g}

    def wait_held(self, n, timeout=60):
        """The query of the n-th long poll held (1-based), once it arrived."""
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.held) >= n, timeout):
                raise AssertionError("no %d-th long poll within %d s" % (n, timeout))
            return self.held[n - 1]["query"]

    def release(self, reply):
        """Answers the oldest held long poll not answered yet with `reply`."""
        with self.lock:
            slot = next(s for s in self.held if s["reply"] is None)
            slot["reply"] = reply
            slot["event"].set()

    def wait_count(self, path, n, timeout=60):
        """Waits until `n` requests to `path` arrived (woken by each request)."""
        with self.cond:
            if not self.cond.wait_for(lambda: sum(1 for r in self.requests if r[1] == path) >= n, timeout):
                raise AssertionError("no %d requests to %s within %d s" % (n, path, timeout))

    def count(self, path):
        with self.lock:
            return sum(1 for r in self.requests if r[1] == path)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
