#!/usr/bin/python3
"""Single layers of mobilenet-like CNNs exported from PyTorch (random weights, seed 0), each with
its input as .npy and as raw float32 (.bin, for bench/onnx/ort_run.js), to time one kind of kernel
under kiln and ONNX Runtime apart from the rest of a model:

    /usr/bin/python3 bench/export_layers.py OUT_DIR
    build/bin/kiln compile OUT_DIR/dw_s2_96_112.onnx -o a.kx      # with each build under test
    /usr/bin/python3 bench/ab_executables.py OUT_DIR/dw_s2_96_112.npy a.kx b.kx --repeat 301
    node bench/onnx/ort_run.js OUT_DIR/dw_s2_96_112.onnx OUT_DIR/dw_s2_96_112.bin 1,96,112,112 1 301
"""
import os
import sys

import numpy as np
import torch


def conv_relu6(cin, cout, kernel, stride, groups):
    return torch.nn.Sequential(
        torch.nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups), torch.nn.ReLU6())


LAYERS = {
    # mobilenet_v2's features[2] stride-2 depthwise, and the expand before it.
    "dw_s2_96_112": (lambda: conv_relu6(96, 96, 3, 2, 96), (1, 96, 112, 112)),
    "pw_dw_s2": (lambda: torch.nn.Sequential(conv_relu6(16, 96, 1, 1, 1),
                                             conv_relu6(96, 96, 3, 2, 96)), (1, 16, 112, 112)),
    "dw_s1_144_56": (lambda: conv_relu6(144, 144, 3, 1, 144), (1, 144, 56, 56)),
    "dw_s1_32_112": (lambda: conv_relu6(32, 32, 3, 1, 32), (1, 32, 112, 112)),
    "pw_16_96_112": (lambda: conv_relu6(16, 96, 1, 1, 1), (1, 16, 112, 112)),
    # Stems: mobilenet_v2's 3x3 and resnet18's 7x7, both stride 2; a 64-channel stride-2 layer.
    "stem_3_32_224": (lambda: conv_relu6(3, 32, 3, 2, 1), (1, 3, 224, 224)),
    "stem7": (lambda: conv_relu6(3, 64, 7, 2, 1), (1, 3, 224, 224)),
    "r_l2": (lambda: conv_relu6(64, 128, 3, 2, 1), (1, 64, 56, 56)),
    # dw_s1_144_56 without its padding (a 58x58 input, 'valid'): no padded copy to write.
    "dw_valid_144_58": (lambda: torch.nn.Sequential(
        torch.nn.Conv2d(144, 144, 3, 1, 0, groups=144), torch.nn.ReLU6()), (1, 144, 58, 58)),
    # 3x3 stride-1 dense convolutions (Winograd where kiln applies it): resnet18's first stage,
    # squeezenet1_1's first and second expands.
    "conv3_64_56": (lambda: torch.nn.Conv2d(64, 64, 3, 1, 1, bias=False), (1, 64, 56, 56)),
    "conv3_16_64_55": (lambda: torch.nn.Conv2d(16, 64, 3, 1, 1), (1, 16, 55, 55)),
    "conv3_32_128_27": (lambda: torch.nn.Conv2d(32, 128, 3, 1, 1), (1, 32, 27, 27)),
    # resnet18's last stage: a 3x3 512 -> 512 convolution on 7x7 pixels (49 x 4608 by 4608 x 512).
    "conv3_512_7": (lambda: torch.nn.Conv2d(512, 512, 3, 1, 1, bias=False), (1, 512, 7, 7)),
    # squeezenet1_1's stem (3x3 stride-2 conv, ReLU, 3x3 stride-2 max pool) and its next two
    # max pools (55 and 27 wide, ceil mode).
    "sq_stem": (lambda: torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, 2), torch.nn.ReLU(),
        torch.nn.MaxPool2d(3, 2, ceil_mode=True)), (1, 3, 224, 224)),
    # squeezenet1_1's classifier: a 1x1 convolution 512 -> 1000 at 13x13, ReLU, global pool.
    "sq_classifier": (lambda: torch.nn.Sequential(
        torch.nn.Conv2d(512, 1000, 1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1)),
        (1, 512, 13, 13)),
    "pool_64_111": (lambda: torch.nn.MaxPool2d(3, 2, ceil_mode=True), (1, 64, 111, 111)),
    "pool_128_55": (lambda: torch.nn.MaxPool2d(3, 2, ceil_mode=True), (1, 128, 55, 55)),
    "pool_256_27": (lambda: torch.nn.MaxPool2d(3, 2, ceil_mode=True), (1, 256, 27, 27)),
}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, (make, shape) in LAYERS.items():
        torch.manual_seed(0)
        model = make().eval()
        x = torch.randn(*shape)
        torch.onnx.export(model, x, os.path.join(out, name + ".onnx"), opset_version=17)
        np.save(os.path.join(out, name + ".npy"), x.numpy())
        x.numpy().astype(np.float32).tofile(os.path.join(out, name + ".bin"))
        print("exported", name)


if __name__ == "__main__":
    main()
