"""lockcheck adapter for pottery's Redlock (docs/clients.md, client.md v1).

Run with the project's virtualenv (clients/.venv, made by scripts/setup). pottery's
Redlock is antirez's Redlock over every Redis server of the `redlock` backend: SET
NX PX on each, held when a majority said yes with validity time left
(auto_release_time less the drift and the time the round took). `extend()` resets
the TTL on a majority; `locked()` asks the servers how long our hold has left (0:
not ours). It hands out no fencing token: its value is a random UUID.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from lockcheck_adapter import redis_io_timeout, serve, version  # noqa: E402

from pottery import Redlock  # noqa: E402
from pottery.exceptions import ExtendUnlockedLock, ReleaseUnlockedLock  # noqa: E402
from redis import Redis  # noqa: E402


def handle(req, state):
    try:
        return act(req, state)
    except (ExtendUnlockedLock, ReleaseUnlockedLock) as e:
        # Not ours on a majority: nothing was extended or released. (Its message
        # lists every server's connection pool: the key says enough.)
        return {"type": "fail", "error": f"not-held: {type(e).__name__} on {e.key}"}


def act(req, state):
    op = req["op"]
    if op == "init":
        io_s = redis_io_timeout(req["lease_ms"])
        masters = set()
        for endpoint in req["endpoints"]:
            host, port = endpoint.rsplit(":", 1)
            conn = Redis(host=host, port=int(port), socket_timeout=io_s,
                         socket_connect_timeout=io_s)
            conn.ping()
            masters.add(conn)
        # num_extensions: pottery allows 3 extends per hold by default; a holder
        # that renews through a long critical section needs more.
        state["lock"] = Redlock(key=req["lock"], masters=masters,
                                auto_release_time=req["lease_ms"] / 1000,
                                num_extensions=sys.maxsize)
        state["lease_ms"] = req["lease_ms"]
        return {"type": "ok", "library": f"pottery {version('pottery')}",
                "ops": ["renew", "held"]}
    lock = state["lock"]
    if op == "acquire":
        if lock.acquire(timeout=req["timeout_ms"] / 1000, raise_on_redis_errors=True):
            return {"type": "ok", "token": None, "lease_ms": state["lease_ms"]}
        return {"type": "fail", "error": "held by another client"}
    if op == "renew":
        lock.extend(raise_on_redis_errors=True)
        return {"type": "ok", "token": None, "lease_ms": state["lease_ms"]}
    if op == "release":
        lock.release(raise_on_redis_errors=True)
        return {"type": "ok"}
    if op == "held":
        # locked(): the validity left on a majority of the servers, 0 if not ours.
        return {"type": "ok", "held": lock.locked(raise_on_redis_errors=True) > 0}
    return {"type": "fail", "error": f"unknown op {op}"}


if __name__ == "__main__":
    # A Redis error or a quorum that cannot be had may have left a key somewhere:
    # unknown (`info`).
    serve(handle)
