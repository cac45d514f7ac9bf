"""lockcheck adapter for OpenStack tooz's coordination lock (docs/clients.md,
client.md v1), one adapter for three of its drivers: `redis` (the backend `redis`),
`zookeeper` (kazoo's Lock under it, every node of the backend `zookeeper`) and
`etcd3gw` (the backend `etcd`, through etcd's JSON gateway on n1).

Run with the project's virtualenv (clients/.venv, made by scripts/setup). The
coordinator is started with its heart: a thread of the holder's process that
refreshes every held lock (redis: redis-py's `reacquire()`; etcd3gw: the lock's
lease) every half of `lock_timeout`; a pause stops it too (zookeeper: kazoo's
session heartbeats, the session timeout being the lease). tooz counts
`lock_timeout` in whole seconds, and hands out no fencing token (the etcd3gw
driver's own TODO says it should keep the key's create revision).
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from lockcheck_adapter import serve, version  # noqa: E402

import tooz  # noqa: E402
from tooz import coordination  # noqa: E402


def not_ours(e):
    """Whether tooz's error says the lock was not ours (redis-py's LockError under
    it): nothing was done."""
    cause = e.__cause__
    return cause is not None and type(cause).__name__ in ("LockError", "LockNotOwnedError")


def handle(req, state):
    op = req["op"]
    if op == "init":
        lock_timeout = max(1, math.ceil(req["lease_ms"] / 1000))
        endpoint = req["endpoints"][0]
        # Requests may take at most the lease (tooz's timeout is whole seconds).
        options = f"timeout={lock_timeout}&lock_timeout={lock_timeout}"
        if req["backend"] == "redis":
            driver, url, ops = "redis", f"redis://{endpoint}?{options}", ["renew", "held"]
        elif req["backend"] == "zookeeper":
            hosts = "".join(f"&hosts={e}" for e in req["endpoints"][1:])
            driver, url = "zookeeper", f"kazoo://{endpoint}?{options}{hosts}"
            ops = ["held"]  # the session renews itself: no explicit renew
        elif req["backend"] == "etcd":
            # etcd3gw's locks have no is_still_owner: no `held`.
            driver, url, ops = "etcd3gw", f"etcd3+http://{endpoint}?{options}", ["renew"]
        else:
            return {"type": "fail", "error": f"no tooz driver here for {req['backend']}"}
        coord = coordination.get_coordinator(url, req["client"].encode())
        coord.start(start_heart=True)
        state["coord"], state["name"] = coord, req["lock"].encode()
        state["lease_ms"] = lock_timeout * 1000
        return {"type": "ok", "library": f"tooz {version('tooz')} ({driver})", "ops": ops}
    if op == "acquire":
        # A fresh lock object per hold. `blocking` as a number is the wait; tooz's
        # etcd3gw driver takes acquire's `timeout` as the lease TTL, not the wait.
        state["lock"] = state["coord"].get_lock(state["name"])
        if state["lock"].acquire(blocking=req["timeout_ms"] / 1000):
            return {"type": "ok", "token": None, "lease_ms": state["lease_ms"]}
        return {"type": "fail", "error": "held by another client"}
    lock = state["lock"]
    if op == "renew":
        try:
            renewed = lock.heartbeat()
        except tooz.ToozError as e:
            if not_ours(e):
                return {"type": "fail", "error": f"not-held: {e}"}
            raise
        if renewed:
            return {"type": "ok", "token": None, "lease_ms": state["lease_ms"]}
        return {"type": "fail", "error": "not-held: tooz holds no such lock"}
    if op == "release":
        # tooz's release says False, without raising, when the lock was not ours.
        if lock.release():
            return {"type": "ok"}
        return {"type": "fail", "error": "not-held: tooz could not release it"}
    if op == "held":
        return {"type": "ok", "held": bool(lock.is_still_owner())}
    return {"type": "fail", "error": f"unknown op {op}"}


if __name__ == "__main__":
    serve(handle)
