"""Drives the statistics extension with the real tritonclient (HTTP from .venv-ref, gRPC from
.venv-grpc) and prints what it saw as JSON, for __test__/serve/statistics.spec.js.

    python statistics_client.py http|grpc HOST:PORT < plan.json

The plan: {"version": "1", "ok": [[a, b], ...], "bad": n}. Each "ok" pair is added by model
"add"; each of the "bad" requests sends a shape the model does not take.
"""
import json
import sys

import numpy as np

protocol, url = sys.argv[1], sys.argv[2]
plan = json.load(sys.stdin)
if protocol == "http":
    import tritonclient.http as client_module
    client = client_module.InferenceServerClient(url=url)
else:
    import tritonclient.grpc as client_module
    client = client_module.InferenceServerClient(url=url)
from tritonclient.utils import InferenceServerException

version = plan["version"]


def tensor(name, values, shape):
    t = client_module.InferInput(name, shape, "FP32")
    t.set_data_from_numpy(np.array(values, dtype=np.float32).reshape(shape))
    return t


out = {"sums": [], "errors": []}
for a, b in plan["ok"]:
    r = client.infer("add", [tensor("a", a, [4]), tensor("b", b, [4])], model_version=version)
    out["sums"].append(r.as_numpy("output_0").tolist())
for _ in range(plan["bad"]):
    try:
        client.infer("add", [tensor("a", [1, 2], [2]), tensor("b", [1, 2], [2])], model_version=version)
        out["errors"].append(None)
    except InferenceServerException as e:
        out["errors"].append(e.status())


def stats(*args):
    if protocol == "http":
        return client.get_inference_statistics(*args)
    # as_json gives uint64 as strings, as protobuf's JSON mapping does.
    return client.get_inference_statistics(*args, as_json=True)


out["version"] = stats("add", version)
out["model"] = stats("add")
out["all"] = stats()
try:
    stats("no-such-model")
    out["unknown"] = None
except InferenceServerException as e:
    out["unknown"] = [e.status(), e.message()]
print(json.dumps(out))
