"""ModelStreamInfer against a zgc-runtime server with the real tritonclient[grpc] (from
.venv-grpc), for __test__/serve/grpc-stream.spec.js. Reads on stdin a JSON list of requests
{model, id, x, parameters} (sequence_* as tritonclient's own arguments, any other
parameter as a custom one); sends them all on one stream, in order, without waiting; prints one
JSON list of the responses in the order they came: {id, model, outputs} (with "final" for a
decoupled model's, its triton_final_response) or {error, status}, once each request has had
its last.

    python stream_client.py HOST:PORT
"""
import json
import sys
import threading

import numpy as np
import tritonclient.grpc as C

url = sys.argv[1]
requests = json.load(sys.stdin)
client = C.InferenceServerClient(url=url)
got = []
done = threading.Semaphore(0)


def callback(result, error):
    if error is not None:
        got.append({"error": error.message(), "status": str(error.status())})
        done.release()
        return
    r = result.get_response()
    answer = {"id": r.id, "model": r.model_name, "outputs": {o.name: result.as_numpy(o.name).tolist() for o in r.outputs}}
    # A decoupled model's responses say which is a request's last; a plain one's is its only.
    if "triton_final_response" in r.parameters:
        answer["final"] = r.parameters["triton_final_response"].bool_param
    got.append(answer)
    if answer.get("final", True):
        done.release()


client.start_stream(callback=callback)
for q in requests:
    x = C.InferInput("x", [len(q["x"])], "FP32")
    x.set_data_from_numpy(np.array(q["x"], dtype=np.float32))
    p = q.get("parameters", {})
    client.async_stream_infer(
        q["model"],
        [x],
        request_id=q["id"],
        sequence_id=p.get("sequence_id", 0),
        sequence_start=p.get("sequence_start", False),
        sequence_end=p.get("sequence_end", False),
        parameters={k: v for k, v in p.items() if not k.startswith("sequence_")} or None,
    )
for _ in requests:
    if not done.acquire(timeout=60):
        break
client.stop_stream()
print(json.dumps(got))
