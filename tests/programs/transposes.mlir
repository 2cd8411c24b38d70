// Transposes whose rows and columns are long enough for kiln's square vector tiles, with sizes
// that leave partial tiles at every edge.
func.func @swap(%x: tensor<37x29xf32>) -> tensor<29x37xf32> {
  %e = tensor.empty() : tensor<29x37xf32>
  %t = linalg.transpose ins(%x : tensor<37x29xf32>) outs(%e : tensor<29x37xf32>) permutation = [1, 0]
  return %t : tensor<29x37xf32>
}

// NCHW to NHWC.
func.func @channels_last(%x: tensor<2x19x5x11xf32>) -> tensor<2x5x11x19xf32> {
  %e = tensor.empty() : tensor<2x5x11x19xf32>
  %t = linalg.transpose ins(%x : tensor<2x19x5x11xf32>) outs(%e : tensor<2x5x11x19xf32>)
      permutation = [0, 2, 3, 1]
  return %t : tensor<2x5x11x19xf32>
}
