#!/usr/bin/python3
"""A lock adapter that misbehaves on purpose, for tests/run_clients.rs.

`misbehave.py MODE`: redis-py's Lock (the shipped adapter), except that client-0
misbehaves once, on its third acquire: MODE garbage (a line that is not JSON),
wrong-id, silent (never answers), exit (dies), overlong (a 2 MiB line). MODE
crash-init: every adapter dies at init, as one whose library is missing would.
MODE none: it behaves.
A marker file in the run directory makes the misbehaviour happen once per run.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "clients", "redis-py"))
import redis_py_lock  # noqa: E402

MODE = sys.argv[1]
CLIENT = os.environ["LOCKCHECK_CLIENT"]
MARKER = os.path.join(os.environ["LOCKCHECK_RUN_DIR"], f"misbehaved-{MODE}")


def misbehave(req, acquires):
    """True when this request is the one to spoil (and marks it spoiled)."""
    if MODE == "none" or CLIENT != "client-0" or req["op"] != "acquire" or acquires < 3:
        return False
    if os.path.exists(MARKER):
        return False
    open(MARKER, "w").close()
    return True


def start_orphan():
    """Once per run: a child that would sleep for ten minutes."""
    pid_file = os.path.join(os.environ["LOCKCHECK_RUN_DIR"], "orphan.pid")
    if os.path.exists(pid_file):
        return
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    with open(pid_file, "w") as f:
        f.write(str(child.pid))


def main():
    print(f"adapter {os.getpid()} starting ({MODE})", file=sys.stderr, flush=True)
    state, acquires = {}, 0
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "init" and MODE == "crash-init":
            print("ModuleNotFoundError: No module named 'foolib'", file=sys.stderr, flush=True)
            sys.exit(1)
        if req["op"] == "init" and MODE == "orphan" and CLIENT == "client-0":
            start_orphan()
        acquires += req["op"] == "acquire"
        if misbehave(req, acquires):
            print(f"misbehaving: {MODE} on id {req['id']}", file=sys.stderr, flush=True)
            if MODE in ("garbage", "orphan"):
                print("Traceback (most recent call last): oops", flush=True)
            elif MODE == "wrong-id":
                print(json.dumps({"id": req["id"] + 1000, "type": "ok", "token": None}), flush=True)
            elif MODE == "silent":
                time.sleep(3600)
            elif MODE == "exit":
                os._exit(3)
            elif MODE == "overlong":
                sys.stdout.write("x" * (2 << 20) + "\n")
                sys.stdout.flush()
            continue
        reply = redis_py_lock.handle(req, state)
        reply["id"] = req["id"]
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
