"""Client system shared memory against a zgc-runtime server, with the real tritonclient (HTTP
from .venv-ref, gRPC from .venv-grpc) and its tritonclient.utils.shared_memory regions, for
__test__/serve/shm.spec.js. Prints one JSON document of what it saw.

    python shm_client.py http|grpc HOST:PORT < plan.json

The plan: {"prefix": "/zgc-…-", "dir": a directory for the 1M tensors (.npy), "add": [a, b],
"slow_x": [4 values], "off": true to only try a register (the server does not allow it)}.
"""
import json
import os
import sys
import threading
import time

import numpy as np
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

protocol, url = sys.argv[1], sys.argv[2]
plan = json.load(sys.stdin)
if protocol == "http":
    import gevent
    import tritonclient.http as C

    client = C.InferenceServerClient(url=url, concurrency=4)
    pause = gevent.sleep
else:
    import tritonclient.grpc as C

    client = C.InferenceServerClient(url=url)
    pause = time.sleep

prefix = plan["prefix"]
made = []
out = {}


def region(name, size):
    """A shared memory object of `size` bytes under the plan's prefix, and its key."""
    key = prefix + name
    handle = shm.create_shared_memory_region(name, key, size)
    made.append(handle)
    return handle, key


def error_of(fn):
    try:
        fn()
        return None
    except InferenceServerException as e:
        return [str(e.status()), e.message()]


def tensor(name, shape, values=None):
    t = C.InferInput(name, shape, "FP32")
    if values is not None:
        t.set_data_from_numpy(np.asarray(values, dtype=np.float32).reshape(shape))
    return t


def status():
    if protocol == "http":
        return sorted((r["name"], r["key"], r["offset"], r["byte_size"]) for r in client.get_system_shared_memory_status())
    regions = client.get_system_shared_memory_status().regions
    return sorted((r.name, r.key, r.offset, r.byte_size) for r in regions.values())


if plan.get("off"):
    h, key = region("off", 16)
    out["register"] = error_of(lambda: client.register_system_shared_memory("off", key, 16))
    out["status"] = error_of(lambda: client.get_system_shared_memory_status())
    for h in made:
        shm.destroy_shared_memory_region(h)
    print(json.dumps(out))
    sys.exit(0)

# The round trip: both inputs in one region, the output in another.
a, b = (np.asarray(v, dtype=np.float32) for v in plan["add"])
h_in, key_in = region("in", 32)
shm.set_shared_memory_region(h_in, [a, b])
h_out, key_out = region("out", 16)
client.register_system_shared_memory("in", key_in, 32)
client.register_system_shared_memory("out", key_out, 16)
x, y = tensor("a", [4]), tensor("b", [4])
x.set_shared_memory("in", 16)
y.set_shared_memory("in", 16, offset=16)
o = C.InferRequestedOutput("output_0")
o.set_shared_memory("out", 16)
client.infer("add", [x, y], outputs=[o])
out["round_trip"] = shm.get_contents_as_numpy(h_out, np.float32, [4]).tolist()

# Mixed: one input in shared memory, the other and the output on the wire.
x = tensor("a", [4])
x.set_shared_memory("in", 16)
r = client.infer("add", [x, tensor("b", [4], b)])
out["mixed"] = r.as_numpy("output_0").tolist()

# 1M floats each way (4 MB tensors: the reads and writes off the event loop).
rng = np.random.default_rng(38)
big_a = rng.standard_normal(1 << 20).astype(np.float32)
big_b = rng.standard_normal(1 << 20).astype(np.float32)
h_big, key_big = region("big", 8 << 20)
shm.set_shared_memory_region(h_big, [big_a, big_b])
h_big_out, key_big_out = region("bigout", 4 << 20)
client.register_system_shared_memory("big", key_big, 8 << 20)
client.register_system_shared_memory("bigout", key_big_out, 4 << 20)
x, y = tensor("a", [1 << 20]), tensor("b", [1 << 20])
x.set_shared_memory("big", 4 << 20)
y.set_shared_memory("big", 4 << 20, offset=4 << 20)
o = C.InferRequestedOutput("output_0")
o.set_shared_memory("bigout", 4 << 20)
client.infer("add1m", [x, y], outputs=[o])
np.save(os.path.join(plan["dir"], "a.npy"), big_a)
np.save(os.path.join(plan["dir"], "b.npy"), big_b)
np.save(os.path.join(plan["dir"], "sum.npy"), shm.get_contents_as_numpy(h_big_out, np.float32, [1 << 20]))
out["status"] = status()

# Keys that are no POSIX shared memory name, or that lead outside /dev/shm.
link = prefix + "link"
os.symlink("/etc/passwd", "/dev/shm/" + link[1:])
out["bad_keys"] = {k: error_of(lambda k=k: client.register_system_shared_memory("bad", k, 4)) for k in ["/../etc/passwd", "etc/passwd", "/a/b", "/" + "x" * 300, link, prefix + "missing"]}
os.unlink("/dev/shm/" + link[1:])
out["bad_name"] = error_of(lambda: client.register_system_shared_memory("a*b", key_in, 4))
out["twice"] = error_of(lambda: client.register_system_shared_memory("in", key_in, 32))
out["past_object"] = error_of(lambda: client.register_system_shared_memory("past", key_in, 32, offset=8))


def infer_add(a_at, b_at):
    x, y = tensor("a", [4]), tensor("b", [4])
    x.set_shared_memory(*a_at)
    y.set_shared_memory(*b_at)
    return client.infer("add", [x, y])


out["past_region"] = error_of(lambda: infer_add(("in", 16, 24), ("in", 16)))
out["short_size"] = error_of(lambda: infer_add(("in", 8), ("in", 16)))
out["unknown_region"] = error_of(lambda: infer_add(("nope", 16), ("in", 16)))

# Truncated by its client after registering: a short read, a 400, and the server goes on.
h_cut, key_cut = region("cut", 32)
shm.set_shared_memory_region(h_cut, [a, b])
client.register_system_shared_memory("cut", key_cut, 32)
os.truncate("/dev/shm/" + key_cut[1:], 8)
out["truncated"] = error_of(lambda: infer_add(("cut", 16), ("cut", 16, 16)))


def slow_request(in_region, out_region=None):
    """Starts model "slow" (300 ms) on x from `in_region`; returns a function that waits for its answer."""
    x = tensor("x", [4])
    x.set_shared_memory(in_region, 16)
    outputs = None
    if out_region is not None:
        o = C.InferRequestedOutput("output_0")
        o.set_shared_memory(out_region, 16)
        outputs = [o]
    if protocol == "http":
        req = client.async_infer("slow", [x], outputs=outputs)

        def wait():
            try:
                r = req.get_result()
                return ["ok", r.as_numpy("output_0").tolist() if out_region is None else None]
            except InferenceServerException as e:
                return [str(e.status()), e.message()]
        return wait
    done = threading.Event()
    box = {}

    # tritonclient calls it with keywords.
    def callback(result=None, error=None):
        box["r"] = ["ok", result.as_numpy("output_0").tolist() if out_region is None else None] if error is None else [str(error.status()), error.message()]
        done.set()
    client.async_infer("slow", [x], callback, outputs=outputs)

    def wait():
        done.wait(30)
        return box["r"]
    return wait


# Unregistered while a request reads it: refused, and the request is answered.
h_slow, key_slow = region("slowin", 16)
shm.set_shared_memory_region(h_slow, [np.asarray(plan["slow_x"], dtype=np.float32)])
client.register_system_shared_memory("slowin", key_slow, 16)
wait = slow_request("slowin")
pause(0.12)
out["unregister_in_use"] = error_of(lambda: client.unregister_system_shared_memory("slowin"))
out["in_use_answer"] = wait()
out["unregister_after"] = error_of(lambda: client.unregister_system_shared_memory("slowin"))

# The output's object truncated while the run sleeps: the write is refused, not a SIGBUS.
client.register_system_shared_memory("slowin", key_slow, 16)
h_slow_out, key_slow_out = region("slowout", 16)
client.register_system_shared_memory("slowout", key_slow_out, 16)
wait = slow_request("slowin", "slowout")
pause(0.12)
os.truncate("/dev/shm/" + key_slow_out[1:], 0)
out["truncated_mid_request"] = wait()
out["after_all"] = infer_add(("in", 16), ("in", 16, 16)).as_numpy("output_0").tolist()

client.unregister_system_shared_memory()
out["status_after"] = status()
for h in made:
    shm.destroy_shared_memory_region(h)
print(json.dumps(out))
