// linalg.pack with padding into 2x2 tiles, then linalg.unpack back: both lowered before
// bufferisation (pad/expand/transpose and transpose/collapse/extract).
func.func @main() {
  %src = arith.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0], [11.0, 12.0, 13.0, 14.0, 15.0]]> : tensor<3x5xf32>
  %pad = arith.constant 0.0 : f32
  %dest = tensor.empty() : tensor<2x3x2x2xf32>
  %packed = linalg.pack %src padding_value(%pad : f32) inner_dims_pos = [0, 1] inner_tiles = [2, 2] into %dest : tensor<3x5xf32> -> tensor<2x3x2x2xf32>
  %back = tensor.empty() : tensor<3x5xf32>
  %unpacked = linalg.unpack %packed inner_dims_pos = [0, 1] inner_tiles = [2, 2] into %back : tensor<2x3x2x2xf32> -> tensor<3x5xf32>
  %copy = tensor.empty() : tensor<2x3x2x2xf32>
  %p2 = linalg.copy ins(%packed : tensor<2x3x2x2xf32>) outs(%copy : tensor<2x3x2x2xf32>) -> tensor<2x3x2x2xf32>
  %u = tensor.cast %p2 : tensor<2x3x2x2xf32> to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  %u2 = tensor.cast %unpacked : tensor<3x5xf32> to tensor<*xf32>
  call @printMemrefF32(%u2) : (tensor<*xf32>) -> ()
  return
}
func.func private @printMemrefF32(%ptr : tensor<*xf32>) attributes { llvm.emit_c_interface }
