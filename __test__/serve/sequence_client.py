"""Client sequences against a zgc-runtime server, with the real tritonclient (HTTP from
.venv-ref, gRPC from .venv-grpc), for __test__/serve/sequences.spec.js. Reads on stdin a JSON
list of sequences, each a list of inputs (4 floats a step). In round k it sends step k of
every sequence that has one, all at once, and waits for them all (a sequence's requests go in
order, as Triton asks of its clients). Model "acc" keeps a running sum in its STATE. Prints
one JSON document: each step's answer (or error) by sequence, then the refusals.

    python sequence_client.py http|grpc HOST:PORT FIRST_ID
"""
import json
import sys
import threading

import numpy as np
from tritonclient.utils import InferenceServerException

protocol, url, first_id = sys.argv[1], sys.argv[2], int(sys.argv[3])
sequences = json.load(sys.stdin)
if protocol == "http":
    import tritonclient.http as C

    client = C.InferenceServerClient(url=url, concurrency=64)
else:
    import tritonclient.grpc as C

    client = C.InferenceServerClient(url=url)


def x_of(values):
    t = C.InferInput("x", [4], "FP32")
    t.set_data_from_numpy(np.array(values, dtype=np.float32))
    return t


def as_result(r):
    return {"sum": r.as_numpy("output_0").tolist(), "steps": float(r.as_numpy("output_1")[0])}


def as_error(e):
    return {"error": [str(e.status()), e.message()]}


def send_all(batch):
    """batch: [(key, model, values, kwargs)]; returns {key: result} once all have answered."""
    out = {}
    if protocol == "http":
        pending = [(key, client.async_infer(model, [x_of(v)], **kw)) for key, model, v, kw in batch]
        for key, p in pending:
            try:
                out[key] = as_result(p.get_result())
            except InferenceServerException as e:
                out[key] = as_error(e)
        return out
    done = threading.Semaphore(0)

    def callback_for(key):
        def callback(result=None, error=None):
            out[key] = as_error(error) if error is not None else as_result(result)
            done.release()
        return callback

    for key, model, v, kw in batch:
        client.async_infer(model, [x_of(v)], callback_for(key), **kw)
    for _ in batch:
        done.acquire()
    return out


answers = [[] for _ in sequences]
for k in range(max(len(s) for s in sequences)):
    batch = []
    for i, steps in enumerate(sequences):
        if k < len(steps):
            kw = {"sequence_id": first_id + i, "sequence_start": k == 0, "sequence_end": k == len(steps) - 1}
            batch.append((i, "acc", steps[k], kw))
    got = send_all(batch)
    for i in sorted(got):
        answers[i].append(got[i])


def one(model, **kw):
    return send_all([(0, model, [1, 1, 1, 1], kw)])[0]


refusals = {
    # The first sequence has ended: its id is not active any more.
    "ended": one("acc", sequence_id=first_id),
    "unknown": one("acc", sequence_id=first_id + 100000),
    "noId": one("acc"),
    "notSequential": one("plain", sequence_id=first_id, sequence_start=True),
}
print(json.dumps({"answers": answers, "refusals": refusals}))
