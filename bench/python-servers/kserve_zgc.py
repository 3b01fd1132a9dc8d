"""The KServe 0.21 model server over the Python reference runtime (zgc-runtime 0.1.0): the
same artifacts as zgc-runtime serve, for bench/serving.js's side-by-side figures.
  python kserve_zgc.py HTTP_PORT GRPC_PORT name=artifact.so ..."""
import sys
import uuid

import numpy as np
import zgc
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer


class ZgcModel(Model):
    def __init__(self, name, path):
        super().__init__(name)
        self.path = path
        self.load()

    def load(self):
        self.rt = zgc.Runtime(self.path)
        self.ready = True
        return True

    def predict(self, payload: InferRequest, headers=None, response_headers=None):
        inputs = {i.name: i.as_numpy() for i in payload.inputs}
        outs = self.rt.run(**inputs)
        outputs = []
        for k, t in enumerate(outs):
            a = np.frombuffer(t.buffer, dtype=np.float32).reshape(t.shape)
            o = InferOutput(name=f"output_{k}", shape=list(a.shape), datatype="FP32")
            o.set_data_from_numpy(a, binary_data=payload.use_binary_outputs)
            outputs.append(o)
        # As kserve.utils.get_predict_response builds it: outputs binary where the request
        # asks for them (binary_data_output, or an output's binary_data; raw over gRPC).
        return InferResponse(
            response_id=payload.id or "",
            model_name=self.name,
            infer_outputs=outputs,
            use_binary_outputs=payload.use_binary_outputs,
            requested_outputs=payload.request_outputs,
        )


if __name__ == "__main__":
    http_port, grpc_port = int(sys.argv[1]), int(sys.argv[2])
    models = [ZgcModel(*spec.split("=", 1)) for spec in sys.argv[3:]]
    ModelServer(http_port=http_port, grpc_port=grpc_port, workers=1, enable_docs_url=False).start(models)
