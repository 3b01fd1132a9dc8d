"""The same tritonclient calls against one server (the real Triton, or zgc-runtime serve), for
__test__/triton/triton.spec.js, which runs it against both and compares what each answered.
Model "add" (a + b, FP32[4]) is on both. Prints one JSON document of what it saw.

    python side_by_side.py HTTP_HOST:PORT GRPC_HOST:PORT METRICS_URL
"""
import json
import queue
import sys
import time
import urllib.error
import urllib.request

import grpc
import numpy as np
import tritonclient.grpc as G
import tritonclient.http as H
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tritonclient.grpc import model_config_pb2
from tritonclient.utils import InferenceServerException

http_url, grpc_url, metrics_url = sys.argv[1:4]
rest = H.InferenceServerClient(http_url)
rpc = G.InferenceServerClient(grpc_url)
seen = {}


def inputs(C, a, b=None):
    out = []
    for name, v in (("a", a), ("b", b)):
        if v is None:
            continue
        t = C.InferInput(name, [4], "FP32")
        t.set_data_from_numpy(np.array(v, dtype=np.float32))
        out.append(t)
    return out


def kinds(settings):
    """Each setting's key and the kind of its value, in the order the server gave them."""
    return [[k, type(v).__name__] for k, v in settings.items()]


# Server metadata and the model configuration (parsed strictly by Triton's generated code).
seen["extensions"] = rest.get_server_metadata()["extensions"]
config = json_format.ParseDict(rest.get_model_config("add"), model_config_pb2.ModelConfig(), ignore_unknown_fields=False)
seen["config"] = {
    "input": [[i.name, model_config_pb2.DataType.Name(i.data_type), list(i.dims)] for i in config.input],
    "output": [[o.name, model_config_pb2.DataType.Name(o.data_type), list(o.dims)] for o in config.output],
    "max_batch_size": config.max_batch_size,
    "grpc_same": json_format.MessageToDict(rpc.get_model_config("add").config) == json_format.MessageToDict(config),
}

# A stream: plain requests and a refused one (input b missing), answered each under its id.
answers = queue.Queue()
rpc.start_stream(callback=lambda result, error: answers.put((result, error)))
for k in range(4):
    rpc.async_stream_infer("add", inputs(G, [k] * 4, None if k == 2 else [1] * 4), request_id=f"r{k}")
got = [answers.get(timeout=30) for _ in range(4)]
rpc.stop_stream()
stream = {}
for result, error in got:
    if error is not None:
        stream[error.message().split("]")[0] + "]"] = "error"
    else:
        stream[result.get_response().id] = result.as_numpy("output_0").tolist()
seen["stream"] = dict(sorted(stream.items()))

# Log settings over both protocols: the keys and the kinds of their values, and a round trip.
seen["log"] = {"rest": kinds(rest.get_log_settings()), "rest_update": rest.update_log_settings({"log_verbose_level": 1})["log_verbose_level"]}
g = rpc.get_log_settings(as_json=True)["settings"]
seen["log"]["grpc"] = sorted([k, next(iter(v))] for k, v in g.items())
seen["log"]["grpc_update"] = rpc.update_log_settings({"log_verbose_level": 0}, as_json=True)["settings"]["log_verbose_level"]

# Trace settings: the keys and kinds, server-wide and per model, over both protocols.
seen["trace"] = {
    "rest": kinds(rest.get_trace_settings()),
    "rest_model": kinds(rest.get_trace_settings(model_name="add")),
    "grpc": sorted(rpc.get_trace_settings(as_json=True)["settings"].keys()),
    "grpc_model": sorted(rpc.get_trace_settings(model_name="add", as_json=True)["settings"].keys()),
}


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + "{") and 'model="add"' in line and 'version="1"' in line:
            labels = sorted(p.split("=")[0] for p in line[len(name) + 1:line.index("}")].split(","))
            return labels, float(line.rsplit(" ", 1)[1])
    return None, None


# Triton's metrics: N infers move its counters by N (REST, then gRPC, then a gzip body).
names = ["nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count", "nv_inference_request_duration_us", "nv_inference_queue_duration_us", "nv_inference_compute_infer_duration_us"]
deadline = time.monotonic() + 20
while True:
    # The stream's three answers counted first.
    before = urllib.request.urlopen(metrics_url).read().decode()
    if (metric(before, names[0])[1] or 0) >= 3 or time.monotonic() > deadline:
        break
    time.sleep(0.05)
rest.infer("add", inputs(H, [1] * 4, [2] * 4))
rpc.infer("add", inputs(G, [1] * 4, [2] * 4))
compressed = rest.infer("add", inputs(H, [5] * 4, [5] * 4), request_compression_algorithm="gzip").as_numpy("output_0").tolist()
# Triton's counters reach its metrics endpoint a moment after the answer: read until the three are counted.
deadline = time.monotonic() + 20
while True:
    after = urllib.request.urlopen(metrics_url).read().decode()
    done = metric(after, names[0])[1]
    if done is not None and done - (metric(before, names[0])[1] or 0) >= 3 or time.monotonic() > deadline:
        break
    time.sleep(0.05)
seen["metrics"] = {}
for n in names:
    labels, v0 = metric(before, n)
    _, v1 = metric(after, n)
    seen["metrics"][n] = {"labels": labels, "grew": None if v0 is None else (v1 - v0 if n.endswith("_success") or n.endswith("_count") else v1 > v0)}
seen["compressed"] = compressed

# A refused infer over each protocol: the status a client sees.
try:
    rest.infer("add", inputs(H, [1] * 4))
except InferenceServerException as e:
    seen["refused_rest"] = str(e.status())
try:
    rpc.infer("add", inputs(G, [1] * 4))
except InferenceServerException as e:
    seen["refused_grpc"] = str(e.status())

# The generate extension: a JSON answer, and the same as server-sent events.
def post(path, body):
    req = urllib.request.Request(f"http://{http_url}/v2/models/add/{path}", data=json.dumps(body).encode(), method="POST")
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.headers["content-type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["content-type"], e.read().decode()


status, kind, text = post("generate", {"id": "g", "a": [1, 2, 3, 4], "b": [1, 1, 1, 1]})
seen["generate"] = [status, kind, json.loads(text)]
status, kind, text = post("generate_stream", {"a": [1, 2, 3, 4], "b": [0.5] * 4})
seen["generate_stream"] = [status, kind, [json.loads(e[len("data: "):]) for e in text.split("\n\n") if e]]
status, kind, text = post("generate", {"a": [1, 2, 3], "b": [1, 1, 1, 1]})
seen["generate_refused"] = [status, kind, sorted(json.loads(text).keys())]

# grpc.health.v1 on the gRPC port.
health = health_pb2_grpc.HealthStub(grpc.insecure_channel(grpc_url))
seen["health"] = health_pb2.HealthCheckResponse.ServingStatus.Name(health.Check(health_pb2.HealthCheckRequest(service="")).status)
print(json.dumps(seen))
