"""Dynamic batching against a zgc-runtime server, with the real tritonclient (HTTP from
.venv-ref, gRPC from .venv-grpc), for __test__/serve/batching.spec.js. Reads a JSON list of
requests ({"x": [rows x 4 floats], "s": [rows floats]}) on stdin, sends them all at once to
model "affine" (HTTP: every other one as JSON, the rest as binary data), then the requests
that must be refused. Prints one JSON document of what came back, in request order.

    python batching_client.py http|grpc HOST:PORT
    python batching_client.py http|grpc HOST:PORT wide ROWS

The second form sends one request of ROWS rows to model "wide" (the 1M add, batched: a
request of more than 1 MB, which the server parses on a parser thread) and prints the
answer's shape and sum.
"""
import json
import sys
import threading

import numpy as np
from tritonclient.utils import InferenceServerException

protocol, url = sys.argv[1], sys.argv[2]
wide = len(sys.argv) > 3
if protocol == "http":
    import tritonclient.http as C

    client = C.InferenceServerClient(url=url, concurrency=32)
else:
    import tritonclient.grpc as C

    client = C.InferenceServerClient(url=url)


if wide:
    rows = int(sys.argv[4])
    a = np.arange(rows, dtype=np.float32)
    ins = []
    for name, v in (("a", a), ("b", np.ones(rows, dtype=np.float32))):
        t = C.InferInput(name, [rows], "FP32")
        t.set_data_from_numpy(v)
        ins.append(t)
    out = client.infer("wide", ins).as_numpy("output_0")
    print(json.dumps({"shape": list(out.shape), "sum": float(out.astype(np.float64).sum())}))
    sys.exit(0)
requests = json.load(sys.stdin)


def inputs_of(req, i):
    x = np.array(req["x"], dtype=np.float32).reshape(-1, 4)
    s = np.array(req["s"], dtype=np.float32)
    tx = C.InferInput("x", list(x.shape), "FP32")
    ts = C.InferInput("s", list(s.shape), "FP32")
    if protocol == "http":
        binary = i % 2 == 1
        tx.set_data_from_numpy(x, binary_data=binary)
        ts.set_data_from_numpy(s, binary_data=binary)
    else:
        tx.set_data_from_numpy(x)
        ts.set_data_from_numpy(s)
    return [tx, ts]


def as_result(r):
    y, total = r.as_numpy("output_0"), r.as_numpy("output_1")
    return {"shape": [list(y.shape), list(total.shape)], "y": y.flatten().tolist(), "total": total.flatten().tolist()}


def as_error(e):
    return {"error": [str(e.status()), e.message()]}


results = [None] * len(requests)
if protocol == "http":
    pending = [client.async_infer("affine", inputs_of(r, i)) for i, r in enumerate(requests)]
    for i, p in enumerate(pending):
        try:
            results[i] = as_result(p.get_result())
        except InferenceServerException as e:
            results[i] = as_error(e)
else:
    done = threading.Semaphore(0)

    def callback_for(i):
        def callback(result=None, error=None):
            results[i] = as_error(error) if error is not None else as_result(result)
            done.release()
        return callback

    for i, r in enumerate(requests):
        client.async_infer("affine", inputs_of(r, i), callback_for(i))
    for _ in requests:
        done.acquire()


def refused(x_rows, s_rows):
    x = C.InferInput("x", [x_rows, 4], "FP32")
    x.set_data_from_numpy(np.zeros((x_rows, 4), dtype=np.float32))
    s = C.InferInput("s", [s_rows], "FP32")
    s.set_data_from_numpy(np.zeros(s_rows, dtype=np.float32))
    try:
        client.infer("affine", [x, s])
        return "answered"
    except InferenceServerException as e:
        return as_error(e)["error"]


meta = client.get_model_metadata("affine")
if protocol == "grpc":
    shapes = {t.name: [int(d) for d in t.shape] for t in list(meta.inputs) + list(meta.outputs)}
else:
    shapes = {t["name"]: t["shape"] for t in meta["inputs"] + meta["outputs"]}
print(json.dumps({"results": results, "tooMany": refused(9, 9), "mismatched": refused(2, 3), "shapes": shapes}))
