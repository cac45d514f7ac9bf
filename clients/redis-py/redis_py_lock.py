#!/usr/bin/env python3
"""lockcheck adapter for redis-py's Lock (docs/clients.md, client.md v1).

redis-py's Lock is SET key <random token> NX PX <timeout>; extend and release
run Lua scripts that act only while the key still holds that token; owned()
GETs the key and compares. It hands out no fencing token.
"""
import json
import sys

import redis
from redis.exceptions import LockError, LockNotOwnedError


def handle(req, state):
    op = req["op"]
    if op == "init":
        host, port = req["endpoints"][0].rsplit(":", 1)
        lease_s = req["lease_ms"] / 1000
        # A request may take a quarter of the lease, as lockcheck's own client allows.
        io_s = min(max(lease_s / 4, 0.1), 2.0)
        conn = redis.Redis(host=host, port=int(port), socket_timeout=io_s,
                           socket_connect_timeout=io_s)
        conn.ping()
        state["lock"] = conn.lock(req["lock"], timeout=lease_s)
        state["lease_ms"] = req["lease_ms"]
        return {"type": "ok", "library": f"redis-py {redis.__version__}",
                "ops": ["renew", "held"]}
    lock = state["lock"]
    if op == "acquire":
        if lock.acquire(blocking=True, blocking_timeout=req["timeout_ms"] / 1000):
            return {"type": "ok", "token": None, "lease_ms": state["lease_ms"]}
        return {"type": "fail", "error": "held by another client"}
    if op == "renew":
        lock.extend(state["lease_ms"] / 1000, replace_ttl=True)
        return {"type": "ok", "token": None, "lease_ms": state["lease_ms"]}
    if op == "release":
        lock.release()
        return {"type": "ok"}
    if op == "held":
        return {"type": "ok", "held": lock.owned()}
    return {"type": "fail", "error": f"unknown op {op}"}


def main():
    state = {}
    for line in sys.stdin:
        req = json.loads(line)
        try:
            reply = handle(req, state)
        except (LockNotOwnedError, LockError) as e:
            # The script found another token, or none: it did not act.
            reply = {"type": "fail", "error": f"not-held: {e}"}
        except (redis.ConnectionError, redis.TimeoutError) as e:
            # The command may have reached the server before the connection failed.
            reply = {"type": "info", "error": f"{type(e).__name__}: {e}"}
        except Exception as e:  # anything else: unknown effect, and said so
            print(f"{req['op']}: {e!r}", file=sys.stderr, flush=True)
            reply = {"type": "info", "error": f"{type(e).__name__}: {e}"}
        reply["id"] = req["id"]
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
