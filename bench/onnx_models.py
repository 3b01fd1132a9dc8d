"""ONNX models equivalent to the bench fixtures, for onnxruntime-node: written with the onnx
package into the directory given. add.onnx: y = a + b over f32[4]; add-1m.onnx: the same over
f32[1048576]; matmul.onnx: y = a @ b over f32[256, 256] with b a weight of ones (the fixture's
BOUND parameter set to ones)."""
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def add(n):
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [n])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "add", [a, b], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def matmul(n):
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])
    weight = numpy_helper.from_array(np.ones((n, n), dtype=np.float32), "b")
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "matmul", [a], [y], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main(out):
    for name, model in [("add", add(4)), ("add-1m", add(1 << 20)), ("matmul", matmul(256))]:
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, f"{out}/{name}.onnx")
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
