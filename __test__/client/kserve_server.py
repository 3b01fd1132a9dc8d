"""KServe's Python model server (the kserve SDK's ModelServer), serving two models for the
client's tests: "add" (a + b, its inputs and outputs described in its metadata) and "twice"
(2 * its one input, of any name and datatype; its metadata lists none, as a custom model's
does unless it says)."""
import sys

import numpy as np
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer


class Add(Model):
    def __init__(self):
        super().__init__("add")
        self.ready = True

    def get_input_types(self):
        return [{"name": "a", "datatype": "FP32", "shape": [4]}, {"name": "b", "datatype": "FP32", "shape": [4]}]

    def get_output_types(self):
        return [{"name": "output_0", "datatype": "FP32", "shape": [4]}]

    def predict(self, payload: InferRequest, headers=None, response_headers=None):
        given = {i.name: i.as_numpy() for i in payload.inputs}
        out = InferOutput(name="output_0", shape=[4], datatype="FP32")
        out.set_data_from_numpy((given["a"] + given["b"]).astype(np.float32), binary_data=payload.use_binary_outputs if hasattr(payload, "use_binary_outputs") else False)
        return InferResponse(response_id=payload.id or "", model_name=self.name, infer_outputs=[out])


class Twice(Model):
    def __init__(self):
        super().__init__("twice")
        self.ready = True

    def predict(self, payload: InferRequest, headers=None, response_headers=None):
        x = payload.inputs[0]
        arr = x.as_numpy()
        out = InferOutput(name="y", shape=list(arr.shape), datatype=x.datatype)
        out.set_data_from_numpy((arr * 2).astype(arr.dtype))
        return InferResponse(response_id=payload.id or "", model_name=self.name, infer_outputs=[out])


if __name__ == "__main__":
    http_port, grpc_port = int(sys.argv[1]), int(sys.argv[2])
    ModelServer(http_port=http_port, grpc_port=grpc_port, workers=1, enable_docs_url=False).start([Add(), Twice()])
