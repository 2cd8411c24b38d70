// The bundled MLP (examples/mlp.mlir) with constant inputs and a printing main, for comparing
// mlir-runner and kiln on the same file.
module @mlp_runner {
  func.func @mlp(%x: tensor<1x8x64xf32>, %w1: tensor<1x64x128xf32>, %b1: tensor<1x1x128xf32>,
                 %w2: tensor<1x128x10xf32>, %b2: tensor<1x1x10xf32>) -> tensor<1x8x10xf32> {
    %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
    %h = tosa.matmul %x, %w1, %zp, %zp : (tensor<1x8x64xf32>, tensor<1x64x128xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x128xf32>
    %hb = tosa.add %h, %b1 : (tensor<1x8x128xf32>, tensor<1x1x128xf32>) -> tensor<1x8x128xf32>
    %r = tosa.clamp %hb {min_val = 0.0 : f32, max_val = 3.4028235e+38 : f32, nan_mode = "IGNORE"} : (tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
    %o = tosa.matmul %r, %w2, %zp, %zp : (tensor<1x8x128xf32>, tensor<1x128x10xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x10xf32>
    %ob = tosa.add %o, %b2 : (tensor<1x8x10xf32>, tensor<1x1x10xf32>) -> tensor<1x8x10xf32>
    return %ob : tensor<1x8x10xf32>
  }
  func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}
  func.func @runner_main() {
    %x = arith.constant dense<0.5> : tensor<1x8x64xf32>
    %w1 = arith.constant dense<0.25> : tensor<1x64x128xf32>
    %b1 = arith.constant dense<-1.0> : tensor<1x1x128xf32>
    %w2 = arith.constant dense<0.125> : tensor<1x128x10xf32>
    %b2 = arith.constant dense<2.0> : tensor<1x1x10xf32>
    %y = call @mlp(%x, %w1, %b1, %w2, %b2) : (tensor<1x8x64xf32>, tensor<1x64x128xf32>, tensor<1x1x128xf32>, tensor<1x128x10xf32>, tensor<1x1x10xf32>) -> tensor<1x8x10xf32>
    %m = bufferization.to_buffer %y : tensor<1x8x10xf32> to memref<1x8x10xf32>
    %u = memref.cast %m : memref<1x8x10xf32> to memref<*xf32>
    call @printMemrefF32(%u) : (memref<*xf32>) -> ()
    return
  }
}
