"""The schedule policy (per-request priority and timeout) against a zgc-runtime server, with the
real tritonclient (HTTP from .venv-ref, gRPC from .venv-grpc), for
__test__/serve/schedule.spec.js. Prints one JSON document of what it saw.

    python schedule_client.py http|grpc HOST:PORT

Model "prio" is the slow fixture (150 ms a run, one instance, priority levels 1 to 3, default
2); "slow" sleeps 300 ms, "slowiso" too in an isolated instance, "slowtimeout" has a 100 ms
model timeout. Output 1's first element is the run's number in its instance: the run order.
"""
import json
import sys
import threading
import time

import numpy as np
from tritonclient.utils import InferenceServerException

protocol, url = sys.argv[1], sys.argv[2]
if protocol == "http":
    import gevent
    import tritonclient.http as C

    client = C.InferenceServerClient(url=url, concurrency=16)
    pause = gevent.sleep
else:
    import tritonclient.grpc as C

    client = C.InferenceServerClient(url=url)
    pause = time.sleep


def x_of(label):
    t = C.InferInput("x", [4], "FP32")
    t.set_data_from_numpy(np.full(4, label, dtype=np.float32))
    return t


def as_result(r):
    return {"label": float(r.as_numpy("output_0")[0] / 2), "run": float(r.as_numpy("output_1")[0])}


def as_error(e):
    return {"error": [str(e.status()), e.message()]}


def start(model, label, **kw):
    """Sends one request now; returns a function that waits for what it got."""
    if protocol == "http":
        req = client.async_infer(model, [x_of(label)], **kw)

        def wait():
            try:
                return as_result(req.get_result())
            except InferenceServerException as e:
                return as_error(e)
        return wait
    done = threading.Event()
    box = {}

    # tritonclient calls it with keywords.
    def callback(result=None, error=None):
        box["r"] = as_result(result) if error is None else as_error(error)
        done.set()
    client.async_infer(model, [x_of(label)], callback, **kw)

    def wait():
        done.wait(30)
        return box["r"]
    return wait


def call(model, label, **kw):
    try:
        return as_result(client.infer(model, [x_of(label)], **kw))
    except InferenceServerException as e:
        return as_error(e)


out = {}
# Behind a busy instance: levels 1 first, then the default (2), then 3; call order within one.
blocker = start("prio", 100)
pause(0.06)
waits = [start("prio", label, priority=level) for label, level in [(1, 3), (2, 1), (3, 0), (4, 1), (5, 3)]]
out["priority"] = [blocker()] + [w() for w in waits]
out["priority_past_levels"] = call("prio", 9, priority=4)

# A request's timeout (µs) passes while it waits: it is taken off the queue and never runs.
blocker = start("prio", 200)
pause(0.06)
expired = start("prio", 201, timeout=20000)
out["expired_in_queue"] = expired()
out["after_blocker"] = [blocker(), call("prio", 202)]

# A request's timeout passes during its run: 504 at once; the instance serves the next request.
t0 = time.monotonic()
out["timeout_in_run"] = call("slow", 7, timeout=50000)
out["timeout_in_run_ms"] = (time.monotonic() - t0) * 1000
out["slow_after"] = call("slow", 8)
# The model's own timeout is the cap: a longer request timeout does not lengthen it.
out["capped"] = call("slowtimeout", 9, timeout=10_000_000)
# Isolated: the run's process is killed at the request's deadline and another one answers next.
out["isolated_timeout"] = call("slowiso", 10, timeout=50000)
out["isolated_after"] = call("slowiso", 11)
print(json.dumps(out))
