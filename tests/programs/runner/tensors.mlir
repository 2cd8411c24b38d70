// Tensor computation inside an mlir-runner style main: a matmul of constants, printed.
func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}

func.func @main() {
  %a = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %b = arith.constant dense<[[1.0, 0.5], [0.25, -1.0], [2.0, 3.0]]> : tensor<3x2xf32>
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<2x2xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<2x2xf32>) -> tensor<2x2xf32>
  %c = linalg.matmul ins(%a, %b : tensor<2x3xf32>, tensor<3x2xf32>) outs(%acc : tensor<2x2xf32>) -> tensor<2x2xf32>
  %e = math.exp %c : tensor<2x2xf32>
  %m = bufferization.to_buffer %e : tensor<2x2xf32> to memref<2x2xf32>
  %u = memref.cast %m : memref<2x2xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}
