#!/usr/bin/python3
"""lockcheck adapter for kazoo's Lock (docs/clients.md, client.md v1).

kazoo's Lock is ZooKeeper's lock recipe: an ephemeral sequential znode under the
lock's path; the lowest holds, the others watch their predecessor. The znode's
sequence number is a fencing token: a later holder's znode was created later,
so its sequence is greater. The session timeout is the lease.
"""
import json
import logging
import sys

import kazoo
from kazoo.client import KazooClient
from kazoo.exceptions import (ConnectionLoss, KazooException, LockTimeout,
                              OperationTimeoutError, SessionExpiredError)
from kazoo.handlers.threading import KazooTimeoutError


def version():
    try:
        from importlib.metadata import version as v
        return v("kazoo")
    except Exception:
        return getattr(kazoo, "__version__", "?")


def handle(req, state):
    op = req["op"]
    if op == "init":
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
        lease_s = req["lease_ms"] / 1000
        zk = KazooClient(hosts=",".join(req["endpoints"]), timeout=lease_s)
        zk.start(timeout=10)
        state["lock"] = zk.Lock(f"/lockcheck-kazoo/{req['lock']}", identifier=req["client"])
        state["lease_ms"] = req["lease_ms"]
        return {"type": "ok", "library": f"kazoo {version()}", "ops": ["held"]}
    lock = state["lock"]
    if op == "acquire":
        try:
            got = lock.acquire(blocking=True, timeout=req["timeout_ms"] / 1000)
        except LockTimeout:
            got = False
        if not got:
            return {"type": "fail", "error": "held by another client"}
        # The znode's name ends in its 10-digit sequence number.
        return {"type": "ok", "token": int(lock.node[-10:]), "lease_ms": state["lease_ms"]}
    if op == "release":
        if lock.release():
            return {"type": "ok"}
        return {"type": "fail", "error": "not-held: kazoo says it holds nothing"}
    if op == "held":
        # What kazoo believes: its flag, not the znode (no request to ZooKeeper).
        return {"type": "ok", "held": bool(lock.is_acquired)}
    return {"type": "fail", "error": f"unknown op {op}"}


def main():
    state = {}
    for line in sys.stdin:
        req = json.loads(line)
        try:
            reply = handle(req, state)
        except (ConnectionLoss, SessionExpiredError, OperationTimeoutError,
                KazooTimeoutError, KazooException) as e:
            # A request may have reached ZooKeeper before the session failed.
            reply = {"type": "info", "error": f"{type(e).__name__}: {e}"}
        except Exception as e:
            print(f"{req['op']}: {e!r}", file=sys.stderr, flush=True)
            reply = {"type": "info", "error": f"{type(e).__name__}: {e}"}
        reply["id"] = req["id"]
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
