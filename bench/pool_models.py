#!/usr/bin/python3
"""One-node ONNX MaxPool models (3x3, stride 2, ceil mode) with the shapes of squeezenet's short-row
pools, and a random input for each, for timing one pool alone:

    /usr/bin/python3 bench/pool_models.py OUT_DIR
    build/bin/kiln run OUT_DIR/pool_256x27.onnx --input OUT_DIR/pool_256x27.npy \\
        --repeat 201 --no-cache --set KILN_NUM_THREADS=1
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

SHAPES = [(256, 27), (128, 55), (64, 111)]  # (channels, rows = columns)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    for channels, size in SHAPES:
        name = "pool_%dx%d" % (channels, size)
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                                ceil_mode=1)
        graph = helper.make_graph([node], name, [x], [y])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                  os.path.join(out, name + ".onnx"))
        np.save(os.path.join(out, name + ".npy"),
                rng.random((1, channels, size, size), dtype=np.float32))
        print("wrote", name)


if __name__ == "__main__":
    main()
