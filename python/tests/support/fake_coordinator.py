"""A minimal in-process coordinator for unit tests: speaks the HTTP API of
docs/migration.md for one job of world size N; every report starts a new generation with
the same members. Records every request. Thread-safe (one lock); stop() makes it
unreachable."""
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
                    self._reply(*fake.plan(q.get("member", [""])[0]))

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.requests.append(("POST", self.path, body))
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

    def count(self, path):
        with self.lock:
            return sum(1 for r in self.requests if r[1] == path)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
