"""Talks to a zgc-runtime server with the real tritonclient[http] from PyPI and prints what it
saw as one JSON document, for __test__/serve/rest.spec.js to check against direct runs.

    python triton_client.py HOST:PORT
"""
import json
import sys

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

url = sys.argv[1]
client = httpclient.InferenceServerClient(url=url, concurrency=200, network_timeout=60.0)
rng = np.random.default_rng(14)
out = {}

out["live"] = client.is_server_live()
out["ready"] = client.is_server_ready()
out["server"] = client.get_server_metadata()
out["dtypes_metadata"] = client.get_model_metadata("dtypes")
out["add_v2_metadata"] = client.get_model_metadata("add", "2")
out["add_ready"] = client.is_model_ready("add")
out["add_v2_ready"] = client.is_model_ready("add", "2")
out["add_v9_ready"] = client.is_model_ready("add", "9")
out["index"] = client.get_model_repository_index()


def dtypes_inputs():
    return {
        "x": rng.uniform(-4, 4, size=(2, 3)).astype(np.float32),
        "h": rng.uniform(-8, 8, size=(4,)).astype(np.float16),
        "q": rng.integers(-128, 128, size=(5,)).astype(np.int8),
        "m": rng.integers(0, 2, size=(5,)).astype(bool),
    }


def tensor(name, array, binary):
    datatype = {np.float32: "FP32", np.float16: "FP16", np.int8: "INT8", np.bool_: "BOOL"}[array.dtype.type]
    t = httpclient.InferInput(name, list(array.shape), datatype)
    t.set_data_from_numpy(array, binary_data=binary)
    return t


def as_list(array):
    # f16 travels as its bits so that the comparison is exact.
    if array.dtype == np.float16:
        return {"dtype": "f16", "bits": array.view(np.uint16).ravel().tolist()}
    if array.dtype == np.bool_:
        return {"dtype": "bool", "values": array.astype(np.uint8).ravel().tolist()}
    return {"dtype": str(array.dtype), "values": array.ravel().tolist()}


def run_dtypes(binary):
    results = []
    names = ["o0", "o1", "o2", "o3", "o5"]  # o4 reads STATE, which depends on earlier runs
    for _ in range(4):
        inputs = dtypes_inputs()
        outputs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in names]
        r = client.infer("dtypes", [tensor(k, v, binary) for k, v in inputs.items()], outputs=outputs, request_id="rq-%d" % len(results))
        results.append({
            "inputs": {k: as_list(v) for k, v in inputs.items()},
            "outputs": {n: as_list(r.as_numpy(n)) for n in names},
            "id": r.get_response()["id"],
            "returned": [o["name"] for o in r.get_response()["outputs"]],
            "binary_sizes": [o.get("parameters", {}).get("binary_data_size") for o in r.get_response()["outputs"]],
        })
    return results


out["dtypes_json"] = run_dtypes(False)
out["dtypes_binary"] = run_dtypes(True)

# A 1M-element model over the binary extension.
a = rng.standard_normal(1 << 20).astype(np.float32)
b = rng.standard_normal(1 << 20).astype(np.float32)
r = client.infer("add1m", [tensor("a", a, True), tensor("b", b, True)], outputs=[httpclient.InferRequestedOutput("output_0", binary_data=True)])
out["add1m_max_error"] = float(np.max(np.abs(r.as_numpy("output_0") - (a + b))))


def status_of(fn):
    try:
        fn()
        return {"status": "200"}
    except InferenceServerException as e:
        return {"status": e.status(), "message": e.message()}


x4 = np.arange(4, dtype=np.float32)
# Bodies compressed by tritonclient itself (request_compression_algorithm), JSON and binary.
c4 = np.array([0.5, -1.25, 3.0, 1e-3], dtype=np.float32)
out["compressed"] = {
    f"{alg}_{'binary' if binary else 'json'}": client.infer("add", [tensor("a", x4, binary), tensor("b", c4, binary)], request_compression_algorithm=alg).as_numpy("output_0").tolist()
    for alg in ("gzip", "deflate")
    for binary in (False, True)
}
errors = {}
errors["unknown_model"] = status_of(lambda: client.infer("nope", [tensor("a", x4, False)]))
errors["unknown_version"] = status_of(lambda: client.infer("add", [tensor("a", x4, False), tensor("b", x4, False)], model_version="9"))
errors["unknown_input"] = status_of(lambda: client.infer("add", [tensor("a", x4, False), tensor("zz", x4, False)]))
errors["missing_input"] = status_of(lambda: client.infer("add", [tensor("a", x4, False)]))
errors["wrong_shape"] = status_of(lambda: client.infer("add", [tensor("a", np.zeros(5, np.float32), False), tensor("b", x4, False)]))
errors["wrong_datatype"] = status_of(lambda: client.infer("add", [tensor("a", x4.astype(np.float16), False), tensor("b", x4, False)]))
errors["unknown_output"] = status_of(lambda: client.infer("add", [tensor("a", x4, False), tensor("b", x4, False)], outputs=[httpclient.InferRequestedOutput("nope")]))
errors["model_status"] = status_of(lambda: client.infer("status", [
    tensor("run_status", np.array(5, np.int8), False), tensor("copy_status", np.array(0, np.int8), False),
    tensor("bind_status", np.array(0, np.int8), False), tensor("buf", np.array([1, 2], np.float32), False)]))
ok = client.infer("status", [
    tensor("run_status", np.array(0, np.int8), False), tensor("copy_status", np.array(0, np.int8), False),
    tensor("bind_status", np.array(0, np.int8), False), tensor("buf", np.array([1.5, 2], np.float32), True)])
errors["model_after_status"] = ok.as_numpy("output_0").tolist()
errors["timeout"] = status_of(lambda: client.infer("slowtimeout", [tensor("x", x4, False)]))
errors["metadata_unknown"] = status_of(lambda: client.get_model_metadata("nope"))
out["errors"] = errors

# 200 concurrent infers, each with its own inputs, checked against numpy.
pending = []
for i in range(200):
    a4 = rng.uniform(-100, 100, size=4).astype(np.float32)
    b4 = rng.uniform(-100, 100, size=4).astype(np.float32)
    binary = i % 2 == 0
    req = client.async_infer("add", [tensor("a", a4, binary), tensor("b", b4, binary)], request_id=str(i),
                             outputs=[httpclient.InferRequestedOutput("output_0", binary_data=binary)])
    pending.append((i, a4 + b4, req))
wrong = 0
ids_ok = 0
for i, expect, req in pending:
    r = req.get_result()
    wrong += int(not np.array_equal(r.as_numpy("output_0"), expect))
    ids_ok += int(r.get_response()["id"] == str(i))
out["concurrent"] = {"count": len(pending), "wrong": wrong, "ids_echoed": ids_ok}

# The repository extension: unload, infer refused, load again, infer served.
client.unload_model("add")
out["after_unload"] = {"ready": client.is_model_ready("add"), "infer": status_of(lambda: client.infer("add", [tensor("a", x4, False), tensor("b", x4, False)]))}
client.load_model("add")
out["after_load"] = client.infer("add", [tensor("a", x4, False), tensor("b", x4, False)]).as_numpy("output_0").tolist()

client.close()
print(json.dumps(out))
