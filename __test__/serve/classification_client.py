"""The classification extension against a zgc-runtime server with the real tritonclient (HTTP
from .venv-ref, gRPC from .venv-grpc), for __test__/serve/classification.spec.js.

    python classification_client.py http|grpc HOST:PORT < plan.json

The plan: {"dtypes": {"x", "h", "q", "m"}, "add": [a, b]}. Prints the dtypes outputs' plain
values, then the same outputs as classes (binary and, over HTTP, JSON), and the refusals.
"""
import json
import sys

import numpy as np
from tritonclient.utils import InferenceServerException

protocol, url = sys.argv[1], sys.argv[2]
if protocol == "http":
    import tritonclient.http as C
else:
    import tritonclient.grpc as C
client = C.InferenceServerClient(url=url)
plan = json.load(sys.stdin)
d = plan["dtypes"]
arrays = {
    "x": np.asarray(d["x"], dtype=np.float32).reshape(2, 3),
    "h": np.asarray(d["h"], dtype=np.float16),
    "q": np.asarray(d["q"], dtype=np.int8),
    "m": np.asarray(d["m"], dtype=bool),
}
TYPES = {np.float32: "FP32", np.float16: "FP16", np.int8: "INT8", np.bool_: "BOOL"}


def inputs():
    out = []
    for name, array in arrays.items():
        t = C.InferInput(name, list(array.shape), TYPES[array.dtype.type])
        t.set_data_from_numpy(array)
        out.append(t)
    return out


def strings(array):
    # Binary BYTES come as bytes, JSON ones as str.
    return [s.decode() if isinstance(s, bytes) else s for s in array.ravel().tolist()], list(array.shape)


out = {}
r = client.infer("dtypes", inputs(), outputs=[C.InferRequestedOutput(n) for n in ["o0", "o1", "o2"]])
out["plain"] = {n: r.as_numpy(n).astype(np.float64).ravel().tolist() for n in ["o0", "o1", "o2"]}
asked = {"o0": 2, "o1": 3, "o2": 10}
r = client.infer("dtypes", inputs(), outputs=[C.InferRequestedOutput(n, class_count=k) for n, k in asked.items()])
out["classes"] = {n: strings(r.as_numpy(n)) for n in asked}
if protocol == "http":
    r = client.infer("dtypes", inputs(), outputs=[C.InferRequestedOutput(n, binary_data=False, class_count=k) for n, k in asked.items()])
    out["classes_json"] = {n: strings(r.as_numpy(n)) for n in asked}

a, b = (np.asarray(v, dtype=np.float32) for v in plan["add"])
ta, tb = C.InferInput("a", [4], "FP32"), C.InferInput("b", [4], "FP32")
ta.set_data_from_numpy(a)
tb.set_data_from_numpy(b)
out["labelled"] = strings(client.infer("labelled", [ta, tb], outputs=[C.InferRequestedOutput("scores", class_count=4)]).as_numpy("scores"))
try:
    client.infer("dtypes", inputs(), outputs=[C.InferRequestedOutput("o3", class_count=2)])
    out["bool"] = None
except InferenceServerException as e:
    out["bool"] = [str(e.status()), e.message()]
print(json.dumps(out))
