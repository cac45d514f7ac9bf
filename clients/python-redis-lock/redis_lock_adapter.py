"""lockcheck adapter for python-redis-lock's Lock (docs/clients.md, client.md v1).

Run with the project's virtualenv (clients/.venv, made by scripts/setup).
`redis_lock.Lock` is SET lock:<name> <random id> NX EX <expire>, in whole seconds;
a waiter blocks on a signal list the releaser pushes to. With `auto_renewal=True`
(as here) a thread of the holder's process extends the key every 2/3 of `expire`:
a pause stops that thread too. It hands out no fencing token; `get_owner_id()`
GETs the key, compared here with our id, is what the library can say of holding.
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from lockcheck_adapter import redis_io_timeout, serve, version  # noqa: E402

import redis  # noqa: E402
import redis_lock  # noqa: E402


def handle(req, state):
    op = req["op"]
    if op == "init":
        host, port = req["endpoints"][0].rsplit(":", 1)
        io_s = redis_io_timeout(req["lease_ms"])
        # The library counts in whole seconds: the lease rounded up.
        expire = max(1, math.ceil(req["lease_ms"] / 1000))
        # A waiter blocks in BLPOP for up to its wait (at most `expire` here): a
        # socket timeout shorter than that would fail every contended acquire.
        conn = redis.Redis(host=host, port=int(port), socket_timeout=expire + io_s,
                           socket_connect_timeout=io_s)
        conn.ping()
        state["expire"] = expire
        state["new"] = lambda: redis_lock.Lock(conn, req["lock"], expire=expire,
                                               auto_renewal=True)
        state["lock"] = None
        state["lease_ms"] = expire * 1000
        return {"type": "ok", "library": f"python-redis-lock {version('python-redis-lock')}",
                "ops": ["renew", "held"]}
    lock = state["lock"]
    if op == "acquire":
        # A fresh Lock (and id) per hold, as redis-py's token is: a lost hold's Lock
        # keeps its renewal thread's state; dropped, that thread ends at its next beat.
        # The library takes the wait in whole seconds (0: until `expire`): at least 1,
        # at most `expire`.
        lock = state["lock"] = state["new"]()
        timeout = min(max(1, round(req["timeout_ms"] / 1000)), state["expire"])
        if lock.acquire(blocking=True, timeout=timeout):
            return {"type": "ok", "token": None, "lease_ms": state["lease_ms"]}
        return {"type": "fail", "error": "held by another client"}
    if op == "renew":
        lock.extend()
        return {"type": "ok", "token": None, "lease_ms": state["lease_ms"]}
    if op == "release":
        lock.release()
        return {"type": "ok"}
    if op == "held":
        return {"type": "ok", "held": lock.get_owner_id() == lock.id}
    return {"type": "fail", "error": f"unknown op {op}"}


if __name__ == "__main__":
    # NotAcquired: the key is not ours (or gone): nothing was extended or released.
    serve(handle, definite=(redis_lock.NotAcquired,))
