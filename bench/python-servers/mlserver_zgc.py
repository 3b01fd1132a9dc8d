"""An MLServer 1.7 runtime over the Python reference runtime (zgc-runtime 0.1.0): the same
artifact as zgc-runtime serve, for bench/serving.js's side-by-side figures."""
import numpy as np
import zgc
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse

DTYPES = {"FP32": np.float32, "INT8": np.int8, "BOOL": np.bool_, "FP16": np.float16}


class ZgcModel(MLModel):
    async def load(self) -> bool:
        self.rt = zgc.Runtime(self.settings.parameters.uri)
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        inputs = {i.name: NumpyCodec.decode_input(i).astype(DTYPES[i.datatype], copy=False) for i in payload.inputs}
        outs = self.rt.run(**inputs)
        arrays = [np.frombuffer(t.buffer, dtype=np.float32).reshape(t.shape) for t in outs]
        return InferenceResponse(
            model_name=self.name,
            id=payload.id,
            outputs=[NumpyCodec.encode_output(name=f"output_{k}", payload=a) for k, a in enumerate(arrays)],
        )
