#!/usr/bin/python3
"""Exports the real-model test set with PyTorch's ONNX exporter: random init (fixed seed), eval
mode, batch 1. For each model writes NAME_opsetN.onnx, NAME.input.npy and NAME.expected.npy
(PyTorch eager's output), so tests compare kiln against PyTorch without importing torch.

usage: export_models.py OUT_DIR [NAME ...]"""
import os
import sys

import numpy as np
import torch


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128), torch.nn.GELU(),
            torch.nn.Linear(128, 10))

    def forward(self, x):
        return torch.softmax(self.net(x), dim=-1)


class SmallCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8)
        self.pool = torch.nn.MaxPool2d(2, ceil_mode=True)
        self.fc = torch.nn.Linear(8 * 4 * 4, 5)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv1(x)))
        x = torch.nn.functional.hardswish(self.conv2(x))
        x = self.pool(x)
        x = torch.nn.functional.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
        return self.fc(torch.flatten(x, 1))


class Recurrent(torch.nn.Module):
    """A 2-layer LSTM then a bidirectional GRU, classifying the last step (as exported: LSTM and
    GRU nodes with empty optional inputs, and a Gather of index -1)."""
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(16, 24, num_layers=2, batch_first=True)
        self.gru = torch.nn.GRU(24, 12, batch_first=True, bidirectional=True)
        self.fc = torch.nn.Linear(24, 5)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, _ = self.gru(y)
        return self.fc(y[:, -1])


class Depthwise(torch.nn.Module):
    """Depthwise convolutions of odd sizes: padded, dilated, unpadded, and one with stride 2."""
    def __init__(self):
        super().__init__()
        self.padded = torch.nn.Conv2d(5, 5, 3, padding=1, groups=5)
        self.dilated = torch.nn.Conv2d(5, 5, 5, padding=4, dilation=2, groups=5)
        self.valid = torch.nn.Conv2d(5, 5, 3, groups=5, bias=False)
        self.strided = torch.nn.Conv2d(5, 5, 3, stride=2, padding=1, groups=5)

    def forward(self, x):
        x = torch.relu(self.padded(x))
        x = torch.clamp(self.dilated(x), 0.0, 6.0) + x
        return self.strided(self.valid(x))


class SqueezeExcite(torch.nn.Module):
    """EfficientNet's pieces at odd sizes: SiLU after convolutions whose rows are shorter than a
    vector (7 and 5 wide), a squeeze-and-excitation gate (global average pool, 1x1 convolutions,
    sigmoid, channel scaling) and a global average pool before the classifier."""
    def __init__(self):
        super().__init__()
        self.expand = torch.nn.Conv2d(6, 24, 1)
        self.depthwise = torch.nn.Conv2d(24, 24, 3, stride=2, padding=1, groups=24)
        self.reduce = torch.nn.Conv2d(24, 6, 1)
        self.restore = torch.nn.Conv2d(6, 24, 1)
        self.project = torch.nn.Conv2d(24, 12, 1)
        self.fc = torch.nn.Linear(12, 5)

    def forward(self, x):
        x = torch.nn.functional.silu(self.expand(x))
        x = torch.nn.functional.silu(self.depthwise(x))
        gate = torch.nn.functional.adaptive_avg_pool2d(x, 1)
        gate = torch.sigmoid(self.restore(torch.nn.functional.silu(self.reduce(gate))))
        x = self.project(x * gate)
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


class ShiftedConvs(torch.nn.Module):
    """Dense stride-1 convolutions whose rows are wide enough to compute as one product per
    kernel tap over the padded width: padded, 3x5 with uneven pads, dilated, unpadded, channel
    counts that are no multiple of a vector, a residual."""
    def __init__(self):
        super().__init__()
        self.padded = torch.nn.Conv2d(5, 7, 3, padding=1)
        self.wide = torch.nn.Conv2d(7, 7, (3, 5), padding=(1, 2), bias=False)
        self.dilated = torch.nn.Conv2d(7, 6, 3, padding=2, dilation=2)
        self.valid = torch.nn.Conv2d(6, 3, 3)

    def forward(self, x):
        x = torch.relu(self.padded(x))
        x = torch.relu(self.wide(x)) + x
        return self.valid(torch.sigmoid(self.dilated(x)))


class PointwiseChains(torch.nn.Module):
    """Pointwise convolutions whose bias, activations and residual adds are computed in the
    product's layout and tiles: ReLU, a residual, SiLU, channel counts and image sizes no vector
    or tile divides; one chain ends in a padded convolution and one in a concatenation (those
    keep the feature map's own layout)."""
    def __init__(self):
        super().__init__()
        self.expand = torch.nn.Conv2d(5, 44, 1)
        self.project = torch.nn.Conv2d(44, 5, 1)
        self.mix = torch.nn.Conv2d(5, 19, 1)
        self.padded = torch.nn.Conv2d(19, 7, 3, padding=1)
        self.side = torch.nn.Conv2d(19, 7, 1)

    def forward(self, x):
        y = torch.relu(self.expand(x))
        y = self.project(y) + x
        z = self.mix(y)
        z = z * torch.sigmoid(z)
        return torch.cat([self.padded(z), torch.relu(self.side(z))], 1)


class ChannelsLastBlocks(torch.nn.Module):
    """Deep inverted residual blocks, more filters than pixels: transposed products and
    channels-last depthwise convolutions whose bias, activations, padding and residual adds stay
    channels-last between them; then consumers that need NCHW (a dense 3x3 convolution, a
    concatenation, the output), and global average and max pools, which pool the channels-last
    value itself."""
    def __init__(self):
        super().__init__()
        self.expand = torch.nn.Conv2d(40, 90, 1)
        self.depthwise = torch.nn.Conv2d(90, 90, 3, padding=1, groups=90)
        self.project = torch.nn.Conv2d(90, 45, 1)
        self.widen = torch.nn.Conv2d(45, 70, 1)
        self.strided = torch.nn.Conv2d(70, 70, 3, stride=2, padding=1, groups=70)
        self.dense = torch.nn.Conv2d(45, 6, 3, padding=1)
        self.side = torch.nn.Conv2d(70, 50, 1)

    def forward(self, x):
        h = torch.nn.functional.relu6(self.expand(x))
        h = torch.nn.functional.relu6(self.depthwise(h))
        a = self.project(h)
        a = a * torch.sigmoid(a) + a
        w = torch.relu(self.widen(a))
        s = self.strided(w)
        d = self.dense(a)
        mean = torch.nn.functional.adaptive_avg_pool2d(w, 1)
        peak = torch.nn.functional.adaptive_max_pool2d(w, 1)
        return torch.cat([torch.flatten(d, 1), torch.flatten(s, 1),
                          torch.flatten(self.side(w), 1), torch.flatten(mean, 1),
                          torch.flatten(peak, 1)], 1)


class WinogradConvs(torch.nn.Module):
    """3x3 stride-1 convolutions of 64 or more channels with one pixel of padding and output rows
    of 14 or more, which kiln computes with Winograd's F(2x2, 3x3): with and without bias, one after another, with a
    residual add, on odd sides (a half-used last block); with fewer blocks than filters (8x7
    blocks, 80 filters: computed channels-last); and on a map too narrow for it (12 wide), which
    is computed directly."""
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Conv2d(64, 72, 3, padding=1)
        self.second = torch.nn.Conv2d(72, 72, 3, padding=1, bias=False)
        self.odd = torch.nn.Conv2d(64, 72, 3, padding=1)
        self.narrow = torch.nn.Conv2d(64, 72, 3, padding=1)
        self.few_blocks = torch.nn.Conv2d(64, 80, 3, padding=1)
        self.few_blocks_again = torch.nn.Conv2d(80, 80, 3, padding=1, bias=False)

    def forward(self, x):
        y = torch.relu(self.first(x))
        y = torch.relu(self.second(y) + y)
        f = torch.relu(self.few_blocks(x[:, :, :15, :14]))
        f = self.few_blocks_again(f) + f
        outs = [y, self.odd(x[:, :, :19, :17]), f, self.narrow(x[:, :, :, :12])]
        return torch.cat([torch.flatten(o, 1) for o in outs], 1)


class StridedDepthwise(torch.nn.Module):
    """Strided depthwise convolutions of NCHW feature maps with rows wide enough to vectorise
    (taps over phase planes): 3x3 stride 2 on odd and even sizes, 5x5 stride 2, no padding,
    stride 3, a 3x5 kernel with stride (2, 1), a 4x4 kernel, each with its bias and ReLU6; one
    after a pointwise convolution whose bias and ReLU6 are computed by the phase copies."""
    def __init__(self):
        super().__init__()
        self.s2 = torch.nn.Conv2d(6, 6, 3, stride=2, padding=1, groups=6)
        self.k5 = torch.nn.Conv2d(6, 6, 5, stride=2, padding=2, groups=6)
        self.valid = torch.nn.Conv2d(6, 6, 3, stride=2, groups=6)
        self.s3 = torch.nn.Conv2d(6, 6, 3, stride=3, padding=1, groups=6)
        self.wide = torch.nn.Conv2d(6, 6, (3, 5), stride=(2, 1), padding=(1, 2), groups=6)
        self.k4 = torch.nn.Conv2d(6, 6, 4, stride=2, padding=1, groups=6)
        self.again = torch.nn.Conv2d(6, 6, 3, stride=2, padding=1, groups=6)
        self.expand = torch.nn.Conv2d(6, 12, 1)
        self.after = torch.nn.Conv2d(12, 12, 3, stride=2, padding=1, groups=12)

    def forward(self, x):
        act = torch.nn.functional.relu6
        outs = [act(self.s2(x)), act(self.k5(x)), act(self.valid(x)), act(self.s3(x)),
                act(self.wide(x)), act(self.k4(x)), act(self.again(x[:, :, :36, :38])),
                act(self.after(act(self.expand(x))))]
        return torch.cat([torch.flatten(o, 1) for o in outs], 1)


class ExpandedDepthwise(torch.nn.Module):
    """Pointwise expansions read only by a strided depthwise convolution, with phase planes of
    8192 columns or more (computed on the phase planes of their own input): ReLU6 then 3x3
    stride 2, SiLU then 5x5 stride 2, ReLU without a bias then 3x3 stride 3 unpadded; odd sizes."""
    def __init__(self):
        super().__init__()
        self.expand6 = torch.nn.Conv2d(5, 12, 1)
        self.dw6 = torch.nn.Conv2d(12, 12, 3, stride=2, padding=1, groups=12)
        self.expand_silu = torch.nn.Conv2d(5, 8, 1)
        self.dw_silu = torch.nn.Conv2d(8, 8, 5, stride=2, padding=2, groups=8)
        self.expand_relu = torch.nn.Conv2d(5, 6, 1, bias=False)
        self.dw_relu = torch.nn.Conv2d(6, 6, 3, stride=3, groups=6)

    def forward(self, x):
        f = torch.nn.functional
        outs = [f.relu6(self.dw6(f.relu6(self.expand6(x)))),
                self.dw_silu(f.silu(self.expand_silu(x))),
                torch.relu(self.dw_relu(torch.relu(self.expand_relu(x))))]
        return torch.cat([torch.flatten(o, 1) for o in outs], 1)


class ShortRowPools(torch.nn.Module):
    """Max pools whose output rows are too short to vectorise along (computed channels-last):
    windows hanging over the end (ceil mode), padding, dilation, rows of 3 to 6."""
    def forward(self, x):
        a = torch.nn.functional.max_pool2d(x, 3, 2, ceil_mode=True)
        b = torch.nn.functional.max_pool2d(-x, 2, 2, padding=1)
        c = torch.nn.functional.max_pool2d(a, 3, 1, padding=1, dilation=2)
        return torch.cat([torch.flatten(a, 1), torch.flatten(b, 1), torch.flatten(c, 1)], 1)


class TapPools(torch.nn.Module):
    """Max pools computed as one kernel over their taps: a convolution's ReLU pooled (kiln pools
    first and applies the ReLU to the smaller result), a ReLU also read elsewhere (pooled as it
    is), strides 1 to 3, padding, ceil mode, and NaNs (logarithms of negative inputs) that every
    window holding one must keep."""
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(4, 6, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(4, 5, 1)

    def forward(self, x):
        f = torch.nn.functional
        a = f.max_pool2d(torch.relu(self.conv1(x)), 3, 2, ceil_mode=True)
        s = torch.relu(x)
        b = f.max_pool2d(s, 2, 2, padding=1) * s.mean()
        c = f.max_pool2d(torch.log(x), 3, 3, padding=1)
        d = f.max_pool2d(self.conv2(x), 3, 1, padding=1)
        return torch.cat([torch.flatten(t, 1) for t in (a, b, c, d)], 1)


def transformer():
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                             dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=2)


def build(name):
    import torchvision
    if name == "mlp":
        return Mlp(), (1, 64)
    if name == "small_cnn":
        return SmallCnn(), (1, 3, 16, 16)
    if name == "depthwise":
        return Depthwise(), (1, 5, 13, 11)
    if name == "squeeze_excite":
        return SqueezeExcite(), (1, 6, 13, 9)
    if name == "shifted_convs":
        return ShiftedConvs(), (1, 5, 9, 33)
    if name == "pointwise_chains":
        return PointwiseChains(), (1, 5, 9, 61)
    if name == "strided_depthwise":
        return StridedDepthwise(), (1, 6, 37, 41)
    if name == "expanded_depthwise":
        return ExpandedDepthwise(), (1, 5, 93, 91)
    if name == "winograd_convs":
        return WinogradConvs(), (1, 64, 20, 18)
    if name == "short_row_pools":
        return ShortRowPools(), (1, 11, 13, 11)
    if name == "tap_pools":
        return TapPools(), (1, 4, 40, 43)
    if name == "channels_last_blocks":
        return ChannelsLastBlocks(), (1, 40, 5, 7)
    if name == "resnet18":
        return torchvision.models.resnet18(weights=None), (1, 3, 224, 224)
    if name == "mobilenet_v2":
        return torchvision.models.mobilenet_v2(weights=None), (1, 3, 224, 224)
    if name == "squeezenet1_1":
        return torchvision.models.squeezenet1_1(weights=None), (1, 3, 224, 224)
    if name == "efficientnet_b0":
        return torchvision.models.efficientnet_b0(weights=None), (1, 3, 224, 224)
    if name == "transformer":
        return transformer(), (1, 16, 32)
    if name == "recurrent":
        return Recurrent(), (2, 7, 16)
    raise SystemExit("unknown model " + name)


def extras(out):
    """Models for the cache and error tests: the MLP with other weights, with a dynamic batch, with
    its weights in an external file, and a graph with operators kiln does not support."""
    import onnx
    from onnx import helper, TensorProto
    torch.manual_seed(1)
    other = Mlp().eval()
    x = torch.rand(1, 64)
    torch.onnx.export(other, (x,), os.path.join(out, "mlp_reseeded_opset13.onnx"), opset_version=13,
                      input_names=["input"], output_names=["output"])
    with torch.no_grad():
        np.save(os.path.join(out, "mlp_reseeded.expected.npy"), other(x).numpy())
    np.save(os.path.join(out, "mlp_reseeded.input.npy"), x.numpy())
    torch.onnx.export(other, (x,), os.path.join(out, "mlp_dynamic_opset13.onnx"), opset_version=13,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    xb = torch.rand(3, 64)
    with torch.no_grad():
        np.save(os.path.join(out, "mlp_dynamic.expected.npy"), other(xb).numpy())
    np.save(os.path.join(out, "mlp_dynamic.input.npy"), xb.numpy())
    # A convolution with more filters than output pixels (kiln transposes its weights once, at
    # load): two checkpoints of it.
    xd = torch.rand(1, 8, 4, 4)
    for seed, name in [(2, "deep_conv"), (3, "deep_conv_reseeded")]:
        torch.manual_seed(seed)
        conv = torch.nn.Conv2d(8, 32, 3, stride=2).eval()
        torch.onnx.export(conv, (xd,), os.path.join(out, name + "_opset13.onnx"), opset_version=13,
                          input_names=["input"], output_names=["output"])
        with torch.no_grad():
            np.save(os.path.join(out, name + ".expected.npy"), conv(xd).numpy())
        np.save(os.path.join(out, name + ".input.npy"), xd.numpy())
    model = onnx.load(os.path.join(out, "mlp_reseeded_opset13.onnx"))
    os.makedirs(os.path.join(out, "external"), exist_ok=True)
    onnx.save_model(model, os.path.join(out, "external", "mlp_external.onnx"),
                    save_as_external_data=True, all_tensors_to_one_file=True,
                    location="mlp_external.weights", size_threshold=0)
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"], name="relu"),
         helper.make_node("NonMaxSuppression", ["a"], ["b"], name="nms"),
         helper.make_node("FancyOp", ["b"], ["y"], name="custom", domain="com.example")],
        "unsupported", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    unsupported = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                          helper.make_opsetid("com.example", 1)])
    onnx.save(unsupported, os.path.join(out, "unsupported.onnx"))
    print("exported extras")


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or ["mlp", "small_cnn", "depthwise", "squeeze_excite", "shifted_convs",
                             "short_row_pools", "tap_pools", "pointwise_chains", "channels_last_blocks",
                             "strided_depthwise", "expanded_depthwise",
                             "winograd_convs", "transformer", "recurrent", "resnet18", "mobilenet_v2", "extras"]
    os.makedirs(out, exist_ok=True)
    for name in names:
        if name == "extras":
            extras(out)
            continue
        torch.manual_seed(0)
        model, shape = build(name)
        model.eval()
        # BatchNorm statistics other than the defaults, so folding them is tested.
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
        x = torch.rand(shape) * 2 - 1
        with torch.no_grad():
            y = model(x)
        np.save(os.path.join(out, name + ".input.npy"), x.numpy())
        np.save(os.path.join(out, name + ".expected.npy"), y.numpy())
        for opset in (13, 17):
            path = os.path.join(out, "%s_opset%d.onnx" % (name, opset))
            # With gradients on, nn.TransformerEncoder takes its exportable path, not the fused
            # inference kernel the exporter cannot express.
            torch.onnx.export(model, (x,), path, opset_version=opset, input_names=["input"],
                              output_names=["output"])
        print("exported", name)


if __name__ == "__main__":
    main()
