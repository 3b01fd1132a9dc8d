"""Requests with W3C traceparent headers from the real tritonclient (HTTP from .venv-ref, gRPC
from .venv-grpc), for __test__/serve/tracing.spec.js, which reads the spans the server made.

    python tracing_client.py http|grpc HOST:PORT TRACEPARENT-OK TRACEPARENT-BAD
"""
import json
import sys

import numpy as np
from tritonclient.utils import InferenceServerException

protocol, url, ok, bad = sys.argv[1:5]
if protocol == "http":
    import tritonclient.http as C
else:
    import tritonclient.grpc as C
client = C.InferenceServerClient(url=url)


def tensor(name, n):
    t = C.InferInput(name, [n], "FP32")
    t.set_data_from_numpy(np.arange(n, dtype=np.float32))
    return t


out = {}
r = client.infer("add", [tensor("a", 4), tensor("b", 4)], headers={"traceparent": ok, "tracestate": "vendor=1"})
out["ok"] = r.as_numpy("output_0").tolist()
try:
    client.infer("add", [tensor("a", 3), tensor("b", 4)], headers={"traceparent": bad})
except InferenceServerException as e:
    out["bad"] = e.message()
client.infer("add", [tensor("a", 4), tensor("b", 4)])
print(json.dumps(out))
