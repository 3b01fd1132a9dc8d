"""The schedule policy's parameters through the kserve SDK's own clients (.venv-grpc), for
__test__/serve/schedule.spec.js: InferRequest(parameters=...) over REST and gRPC.

    python kserve_schedule.py http://HOST:PORT HOST:GRPC_PORT
"""
import asyncio
import json
import logging
import sys

import numpy as np
from kserve import InferenceGRPCClient, InferenceRESTClient, InferInput, InferRequest
from kserve.inference_client import RESTConfig

# The SDK logs each failed call with its traceback; the test reads what it raised.
logging.disable(logging.CRITICAL)


def request(params):
    x = InferInput("x", [4], "FP32")
    x.set_data_from_numpy(np.full(4, 3, dtype=np.float32))
    return InferRequest(model_name="slow", infer_inputs=[x], parameters=params)


async def main():
    rest, grpc = sys.argv[1], sys.argv[2]
    out = {}
    g = InferenceGRPCClient(grpc)
    out["grpc_priority"] = (await g.infer(request({"priority": 1}))).outputs[0].as_numpy().tolist()
    try:
        await g.infer(request({"timeout": 50000}))
        out["grpc_timeout"] = None
    except Exception as e:  # grpc.aio.AioRpcError
        out["grpc_timeout"] = [str(e.code()), e.details()]
    await g.close()
    c = InferenceRESTClient(RESTConfig(protocol="v2"))
    out["rest_priority"] = (await c.infer(rest, request({"priority": 1}), model_name="slow")).outputs[0].as_numpy().tolist()
    try:
        await c.infer(rest, request({"timeout": 50000}), model_name="slow")
        out["rest_timeout"] = None
    except Exception as e:  # the SDK's HTTP status error
        out["rest_timeout"] = str(e)
    await c.close()
    print(json.dumps(out))


asyncio.run(main())
