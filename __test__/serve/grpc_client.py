"""What tritonclient[grpc] (and its generated protobuf stubs) see of `zgc-runtime serve --grpc-port`.

Reads a JSON plan on stdin (inputs chosen by the Jest spec), talks to the server at argv[1],
prints one JSON object of what came back: values, status codes and messages. The spec checks
them against an in-process run of the same artifact.
"""
import json
import sys
import threading

import grpc
import numpy as np
import tritonclient.grpc as tg
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

url = sys.argv[1]
plan = json.load(sys.stdin)
client = tg.InferenceServerClient(url)
stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(url))
out = {}


def status_of(fn):
    try:
        fn()
        return {"code": "OK"}
    except InferenceServerException as e:
        return {"code": str(e.status()).replace("StatusCode.", ""), "message": e.message()}
    except grpc.RpcError as e:
        return {"code": e.code().name, "message": e.details()}


def raw_infer(model, tensors, version=""):
    inputs = []
    for name, datatype, shape, values in tensors:
        t = tg.InferInput(name, shape, datatype)
        dtype = {"FP32": np.float32, "FP16": np.float16, "INT8": np.int8, "BOOL": np.bool_}[datatype]
        t.set_data_from_numpy(np.array(values, dtype=dtype).reshape(shape))
        inputs.append(t)
    return client.infer(model, inputs, model_version=version)


def values(result, name):
    a = result.as_numpy(name)
    return [float(v) if a.dtype.kind == "f" else (bool(v) if a.dtype.kind == "b" else int(v)) for v in a.reshape(-1)]


# Health, metadata, repository.
out["live"] = client.is_server_live()
out["ready"] = client.is_server_ready()
out["model_ready"] = [client.is_model_ready("add"), client.is_model_ready("add", "2"), client.is_model_ready("dtypes")]
md = client.get_model_metadata("dtypes")
out["metadata"] = {"name": md.name, "versions": list(md.versions), "platform": md.platform,
                   "inputs": [[i.name, i.datatype, list(i.shape)] for i in md.inputs],
                   "outputs": [[o.name, o.datatype, list(o.shape)] for o in md.outputs]}
sm = client.get_server_metadata()
out["server"] = {"name": sm.name, "extensions": list(sm.extensions)}
out["index"] = sorted(f"{m.name}/{m.version}:{m.state}" for m in client.get_model_repository_index().models)

# Every dtype through raw contents.
out["dtypes"] = []
for case in plan["dtypes"]:
    r = raw_infer("dtypes", [("x", "FP32", [2, 3], case["x"]), ("h", "FP16", [4], case["h"]),
                             ("q", "INT8", [5], case["q"]), ("m", "BOOL", [5], case["m"])])
    out["dtypes"].append({n: values(r, n) for n in ["o0", "o1", "o2", "o3", "o4", "o5"]}
                         | {"datatypes": [o.datatype for o in r.get_response().outputs]})

# Typed contents (the generated stub: tritonclient itself always sends raw bytes).
def typed(model, tensors, outputs=()):
    req = service_pb2.ModelInferRequest(model_name=model, id="typed-1")
    for name, datatype, shape, field, vals in tensors:
        t = req.inputs.add(name=name, datatype=datatype, shape=shape)
        getattr(t.contents, field).extend(vals)
    for name in outputs:
        req.outputs.add(name=name)
    return stub.ModelInfer(req)

a, b = plan["add"]
resp = typed("add", [("a", "FP32", [4], "fp32_contents", a), ("b", "FP32", [4], "fp32_contents", b)])
out["typed_add"] = {"id": resp.id, "version": resp.model_version,
                    "values": np.frombuffer(resp.raw_output_contents[0], dtype=np.float32).tolist()}
c = plan["dtypes"][0]
# FP16 has no typed contents field: refused, naming the way to send it.
out["typed_dtypes_fp16_refused"] = status_of(lambda: typed("dtypes", [("x", "FP32", [2, 3], "fp32_contents", c["x"]), ("q", "INT8", [5], "int_contents", c["q"]), ("m", "BOOL", [5], "bool_contents", c["m"]), ("h", "FP16", [4], "fp32_contents", c["h"])]))

# Errors, each with its status code and message.
fp = lambda vals: ("a", "FP32", [4], vals)
out["errors"] = {
    "unknown_model": status_of(lambda: raw_infer("nope", [fp(a)])),
    "unknown_version": status_of(lambda: raw_infer("add", [fp(a), ("b", "FP32", [4], b)], version="9")),
    "missing_input": status_of(lambda: raw_infer("add", [fp(a)])),
    "wrong_datatype": status_of(lambda: raw_infer("add", [("a", "INT8", [4], [1, 2, 3, 4]), ("b", "FP32", [4], b)])),
    "wrong_shape": status_of(lambda: raw_infer("add", [("a", "FP32", [2, 2], a), ("b", "FP32", [4], b)])),
    "unknown_input": status_of(lambda: raw_infer("add", [fp(a), ("c", "FP32", [4], b)])),
    "typed_wrong_count": status_of(lambda: typed("add", [("a", "FP32", [4], "fp32_contents", a[:3]), ("b", "FP32", [4], "fp32_contents", b)])),
    "typed_wrong_field": status_of(lambda: typed("add", [("a", "FP32", [4], "int_contents", [1, 2, 3, 4]), ("b", "FP32", [4], "fp32_contents", b)])),
    "typed_int8_range": status_of(lambda: typed("dtypes", [("x", "FP32", [2, 3], "fp32_contents", c["x"]), ("q", "INT8", [5], "int_contents", [1, 2, 300, 4, 5]), ("m", "BOOL", [5], "bool_contents", c["m"]), ("h", "FP16", [4], "fp32_contents", c["h"])])),
    "timeout": status_of(lambda: raw_infer("slowtimeout", [("x", "FP32", [4], [1, 2, 3, 4])])),
    "model_error": status_of(lambda: raw_infer("status", [("run_status", "INT8", [], [3]), ("copy_status", "INT8", [], [0]), ("bind_status", "INT8", [], [0]), ("buf", "FP32", [2], [1, 2])])),
}
out["version_2"] = values(raw_infer("add", [fp(a), ("b", "FP32", [4], b)], version="2"), "output_0")
out["requested"] = [o.name for o in typed("add", [("a", "FP32", [4], "fp32_contents", a), ("b", "FP32", [4], "fp32_contents", b)], outputs=["output_0"]).outputs]

# A full queue: the slow model (one instance, maxQueue 1, 300 ms a run) under 4 calls at once.
codes = []
def slow_call():
    codes.append(status_of(lambda: raw_infer("slow", [("x", "FP32", [4], [1, 2, 3, 4])]))["code"])
threads = [threading.Thread(target=slow_call) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
out["queue_codes"] = sorted(codes)

# 200 calls at once, each with its own inputs, each answered with its own sum.
pairs = plan["concurrent"]
results = [None] * len(pairs)
done = threading.Event()
remaining = [len(pairs)]
lock = threading.Lock()
def callback(i):
    def cb(result, error):
        results[i] = values(result, "output_0") if error is None else str(error)
        with lock:
            remaining[0] -= 1
            if remaining[0] == 0:
                done.set()
    return cb
for i, (x, y) in enumerate(pairs):
    ta = tg.InferInput("a", [4], "FP32"); ta.set_data_from_numpy(np.array(x, dtype=np.float32))
    tb = tg.InferInput("b", [4], "FP32"); tb.set_data_from_numpy(np.array(y, dtype=np.float32))
    client.async_infer("add", [ta, tb], callback(i), request_id=str(i))
done.wait(60)
out["concurrent"] = results

print(json.dumps(out))
