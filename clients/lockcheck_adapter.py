"""The request loop of lockcheck's Python adapters (client.md v1, docs/clients.md).

An adapter gives `serve` its `handle(req, state) -> reply` and says which of its
library's exceptions mean "it definitely did not act" (`fail`, e.g. the lock is no
longer ours); any other exception may have reached the server: `info`. Each request
is answered exactly once, with its id, on one line of stdout; logs go to stderr.
"""
import json
import logging
import sys


def serve(handle, definite=()):
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    state = {}
    for line in sys.stdin:
        req = json.loads(line)
        try:
            reply = handle(req, state)
        except definite as e:
            reply = {"type": "fail", "error": f"not-held: {type(e).__name__}: {str(e)[:200]}"}
        except Exception as e:  # unknown effect, and said so
            print(f"{req['op']}: {e!r}", file=sys.stderr, flush=True)
            reply = {"type": "info", "error": f"{type(e).__name__}: {str(e)[:200]}"}
        reply["id"] = req["id"]
        print(json.dumps(reply), flush=True)


def version(dist):
    """The installed version of the distribution `dist`, as pip names it."""
    from importlib.metadata import version as v
    return v(dist)


def redis_io_timeout(lease_ms):
    """A request may take a quarter of the lease, as lockcheck's own client allows."""
    return min(max(lease_ms / 4000, 0.1), 2.0)
