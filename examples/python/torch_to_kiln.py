#!/usr/bin/python3
"""A PyTorch model exported with torch.onnx.export, compiled and run by kiln, its outputs compared
with PyTorch's. Run it twice: the second start finds the compiled model in kiln's cache.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/torch_to_kiln.py [WORK_DIR]
"""
import os
import sys
import time

import numpy as np
import torch

import kiln


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16 * 8 * 8, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        return torch.softmax(self.fc(torch.flatten(x, 1)), dim=-1)


def main():
    work = sys.argv[1] if len(sys.argv) > 1 else "kiln-example"
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    net = SmallNet().eval()
    x = torch.randn(1, 3, 16, 16)
    path = os.path.join(work, "small_net.onnx")
    if not os.path.exists(path):
        torch.onnx.export(net, (x,), path, opset_version=17)

    cache = kiln.CompilationCache(os.path.join(work, "cache"))
    start = time.perf_counter()
    model = kiln.compile(path, cache=cache)
    y = model(x.numpy())  # compiles (or finds) the program for this input shape
    first_call_ms = (time.perf_counter() - start) * 1000
    with torch.no_grad():
        want = net(x).numpy()
    difference = float(np.abs(y - want).max())
    print(f"cache: {model.report['cache']}  first call: {first_call_ms:.1f} ms  "
          f"max difference from PyTorch: {difference:.2e}")
    return 0 if difference < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
