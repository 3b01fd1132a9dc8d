import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            a = pb_utils.get_input_tensor_by_name(r, "a").as_numpy()
            b = pb_utils.get_input_tensor_by_name(r, "b").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("output_0", (a + b).astype(np.float32))]))
        return out
