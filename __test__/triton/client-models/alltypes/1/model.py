import triton_python_backend_utils as pb_utils

TYPES = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES"]


class TritonPythonModel:
    """Each output is its input, as given: every datatype of the protocol, through Triton."""

    def execute(self, requests):
        out = []
        for r in requests:
            tensors = []
            for t in TYPES:
                given = pb_utils.get_input_tensor_by_name(r, "in_" + t)
                if given is not None:
                    tensors.append(pb_utils.Tensor("out_" + t, given.as_numpy()))
            out.append(pb_utils.InferenceResponse(tensors))
        return out
