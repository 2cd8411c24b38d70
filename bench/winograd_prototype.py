#!/usr/bin/python3
"""Hand-built MLIR of one 3x3 stride-1 pad-1 convolution (NCHW, one image, C channels in and out,
a square side) as Winograd's F(2x2, 3x3), to try transform layouts apart from the importer
(docs/BENCHMARKS.md, session 19). Modes:
  strided        the input's 4x4 blocks read as stride-2 views of the padded input;
  phase          read from the padded input's four phase planes, as the importer does;
  phasemulti     phase, with one multi-output kernel for the 16 input positions and one for the
                 4 output pixels;
  phasemultidst  phasemulti, the input kernel writing into the destination's slices.
The program takes the input (1, C, side, side) and the transformed weights U (16, C, C); for
timing any values do:

    /usr/bin/python3 -c "import numpy as np; r = np.random.default_rng(0); \
      np.save('x.npy', r.standard_normal((1, 64, 56, 56), dtype=np.float32)); \
      np.save('u.npy', r.standard_normal((16, 64, 64), dtype=np.float32))"
    /usr/bin/python3 bench/winograd_prototype.py 64 56 phase > w.mlir
    build/bin/kiln compile w.mlir -o w.kx
    build/bin/kiln run w.kx --input x.npy --input u.npy --repeat 400
"""
import sys

INPUT_TRANSFORM = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]  # Bt
OUTPUT_TRANSFORM = [[1, 1, 1, 0], [0, 1, -1, -1]]  # At


def tensor(shape):
    return "tensor<%sxf32>" % "x".join(map(str, shape))


class Program:
    def __init__(self):
        self.lines = []
        self.count = 0

    def fresh(self):
        self.count += 1
        return "%%v%d" % self.count

    def emit(self, text):
        self.lines.append("  " + text)

    def empty(self, shape):
        name = self.fresh()
        self.emit("%s = tensor.empty() : %s" % (name, tensor(shape)))
        return name

    def extract(self, source, source_shape, offsets, sizes, strides):
        name = self.fresh()
        self.emit("%s = tensor.extract_slice %s[%s] [%s] [%s] : %s to %s" % (
            name, source, ", ".join(map(str, offsets)), ", ".join(map(str, sizes)),
            ", ".join(map(str, strides)), tensor(source_shape), tensor(sizes)))
        return name

    def insert(self, part, into, into_shape, offsets, sizes, strides):
        name = self.fresh()
        self.emit("%s = tensor.insert_slice %s into %s[%s] [%s] [%s] : %s into %s" % (
            name, part, into, ", ".join(map(str, offsets)), ", ".join(map(str, sizes)),
            ", ".join(map(str, strides)), tensor(sizes), tensor(into_shape)))
        return name

    def sums(self, rows, inputs, shape, outputs=None):
        """One elementwise kernel computing sum_k row[k] * inputs[k] for each row (coefficients
        0 or +-1); `outputs` are the kernel's destinations (default: fresh tensors)."""
        rank = len(shape)
        dims = ", ".join("d%d" % d for d in range(rank))
        identity = "affine_map<(%s) -> (%s)>" % (dims, dims)
        outputs = outputs or [self.empty(shape) for _ in rows]
        result = self.fresh()
        self.emit("%s:%d = linalg.generic {indexing_maps = [%s], iterator_types = [%s]} "
                  "ins(%s : %s) outs(%s : %s) {" % (
                      result, len(rows), ", ".join([identity] * (len(inputs) + len(rows))),
                      ", ".join(['"parallel"'] * rank), ", ".join(inputs),
                      ", ".join([tensor(shape)] * len(inputs)), ", ".join(outputs),
                      ", ".join([tensor(shape)] * len(rows))))
        args = ["%%a%d" % k for k in range(len(inputs))]
        self.emit("^bb0(%s, %s):" % (", ".join(a + ": f32" for a in args),
                                     ", ".join("%%o%d: f32" % r for r in range(len(rows)))))
        values = []
        for r, row in enumerate(rows):
            terms = sorted([(c, k) for k, c in enumerate(row) if c != 0], key=lambda t: -t[0])
            value = None
            for coefficient, k in terms:
                if value is None:
                    value = args[k]
                    if coefficient < 0:
                        self.emit("  %%n%d = arith.negf %s : f32" % (r, value))
                        value = "%%n%d" % r
                    continue
                step = "%%s%d_%d" % (r, k)
                op = "arith.addf" if coefficient > 0 else "arith.subf"
                self.emit("  %s = %s %s, %s : f32" % (step, op, value, args[k]))
                value = step
            values.append(value)
        self.emit("  linalg.yield %s : %s" % (", ".join(values), ", ".join(["f32"] * len(values))))
        self.emit("} -> (%s)" % ", ".join([tensor(shape)] * len(rows)))
        return ["%s#%d" % (result, r) for r in range(len(rows))]


def outer(a, b):
    return [x * y for x in a for y in b]


def build(channels, side, mode):
    p = Program()
    blocks = side // 2
    padded_shape = [1, channels, side + 2, side + 2]
    block_shape = [1, channels, blocks, blocks]
    positions_shape = [16, channels, blocks, blocks]
    products_shape = [16, channels, blocks * blocks]
    out_shape = [1, channels, side, side]
    p.lines.append("func.func @main(%%x: %s, %%u: %s) -> %s {" % (
        tensor(out_shape), tensor([16, channels, channels]), tensor(out_shape)))
    p.emit("%zero = arith.constant 0.0 : f32")
    p.emit("%%padded = tensor.pad %%x low[0, 0, 1, 1] high[0, 0, 1, 1] { ^bb0(%%i: index, "
           "%%j: index, %%k: index, %%l: index): tensor.yield %%zero : f32 } : %s to %s" % (
               tensor(out_shape), tensor(padded_shape)))
    # Pixel (k, l) of every input block, as a (1, C, blocks, blocks) view.
    pixels = []
    if mode.startswith("phase"):
        plane_shape = [1, channels, blocks + 1, blocks + 1]
        planes = {}
        for a in range(2):
            for b in range(2):
                view = p.extract("%padded", padded_shape, [0, 0, a, b], plane_shape, [1, 1, 2, 2])
                copy = p.fresh()
                p.emit("%s = linalg.copy ins(%s : %s) outs(%s : %s) -> %s" % (
                    copy, view, tensor(plane_shape), p.empty(plane_shape), tensor(plane_shape),
                    tensor(plane_shape)))
                planes[a, b] = copy
        for k in range(4):
            for l in range(4):
                pixels.append(p.extract(planes[k % 2, l % 2], plane_shape, [0, 0, k // 2, l // 2],
                                        block_shape, [1, 1, 1, 1]))
    else:
        for k in range(4):
            for l in range(4):
                pixels.append(p.extract("%padded", padded_shape, [0, 0, k, l], block_shape,
                                        [1, 1, 2, 2]))
    rows = [outer(INPUT_TRANSFORM[i], INPUT_TRANSFORM[j]) for i in range(4) for j in range(4)]
    positions = p.empty(positions_shape)
    if "multi" in mode:
        destinations = None
        if mode.endswith("dst"):
            destinations = [p.extract(positions, positions_shape, [q, 0, 0, 0], block_shape,
                                      [1, 1, 1, 1]) for q in range(16)]
        transformed = p.sums(rows, pixels, block_shape, destinations)
    else:
        transformed = [p.sums([row], pixels, block_shape)[0] for row in rows]
    for q, value in enumerate(transformed):
        positions = p.insert(value, positions, positions_shape, [q, 0, 0, 0], block_shape,
                             [1, 1, 1, 1])
    flat = p.fresh()
    p.emit("%s = tensor.collapse_shape %s [[0], [1], [2, 3]] : %s into %s" % (
        flat, positions, tensor(positions_shape), tensor(products_shape)))
    zeros = p.fresh()
    p.emit("%s = linalg.fill ins(%%zero : f32) outs(%s : %s) -> %s" % (
        zeros, p.empty(products_shape), tensor(products_shape), tensor(products_shape)))
    products = p.fresh()
    p.emit("%s = linalg.batch_matmul ins(%%u, %s : %s, %s) outs(%s : %s) -> %s" % (
        products, flat, tensor([16, channels, channels]), tensor(products_shape), zeros,
        tensor(products_shape), tensor(products_shape)))
    blocked = p.fresh()
    p.emit("%s = tensor.expand_shape %s [[0], [1], [2, 3]] output_shape [16, %d, %d, %d] : "
           "%s into %s" % (blocked, products, channels, blocks, blocks, tensor(products_shape),
                           tensor(positions_shape)))
    per_position = [p.extract(blocked, positions_shape, [q, 0, 0, 0], block_shape, [1, 1, 1, 1])
                    for q in range(16)]
    out_rows = [outer(OUTPUT_TRANSFORM[a], OUTPUT_TRANSFORM[b]) for a in range(2) for b in range(2)]
    if "multi" in mode:
        parts = p.sums(out_rows, per_position, block_shape)
    else:
        parts = [p.sums([row], per_position, block_shape)[0] for row in out_rows]
    result = p.empty(out_shape)
    for index, part in enumerate(parts):
        a, b = divmod(index, 2)
        result = p.insert(part, result, out_shape, [0, 0, a, b], block_shape, [1, 1, 2, 2])
    p.emit("return %s : %s" % (result, tensor(out_shape)))
    p.lines.append("}")
    return "\n".join(p.lines)


if __name__ == "__main__":
    print(build(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "phase"))
