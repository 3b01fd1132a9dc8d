"""The client cancelling a ModelStreamInfer stream, with the real tritonclient[grpc] (from
.venv-grpc), for __test__/serve/grpc-stream.spec.js. Reads one JSON line {model, requests:
[{id, inputs: {name: [shape, values]}}]}; sends the requests on one stream; prints "sent";
waits for a line on stdin; then stops the stream cancelling what is pending
(stop_stream(cancel_requests=True)) and prints the responses it had, as one JSON line.

    python stream_cancel.py HOST:PORT
"""
import json
import sys

import numpy as np
import tritonclient.grpc as C

url = sys.argv[1]
plan = json.loads(sys.stdin.readline())
client = C.InferenceServerClient(url=url)
got = []


def callback(result, error):
    got.append({"error": error.message()} if error is not None else {"id": result.get_response().id})


client.start_stream(callback=callback)
for q in plan["requests"]:
    inputs = []
    for name, (shape, values) in q["inputs"].items():
        t = C.InferInput(name, shape, "FP32")
        t.set_data_from_numpy(np.array(values, dtype=np.float32).reshape(shape))
        inputs.append(t)
    client.async_stream_infer(plan["model"], inputs, request_id=q["id"])
print("sent", flush=True)
sys.stdin.readline()
client.stop_stream(cancel_requests=True)
print(json.dumps(got), flush=True)
