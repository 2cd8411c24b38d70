// Products whose rows and columns fit one cache tile and are multiples of the register tile
// (49 rows of 7, 40 rows of 8; 64 and 96 columns of 32): every register tile is whole, so none
// needs a mask.
func.func @rows49(%a: tensor<49x70xf32>, %b: tensor<70x64xf32>) -> tensor<49x64xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<49x64xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<49x64xf32>) -> tensor<49x64xf32>
  %r = linalg.matmul ins(%a, %b : tensor<49x70xf32>, tensor<70x64xf32>)
                     outs(%acc : tensor<49x64xf32>) -> tensor<49x64xf32>
  return %r : tensor<49x64xf32>
}

func.func @rows40(%a: tensor<40x24xf32>, %b: tensor<24x96xf32>) -> tensor<40x96xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<40x96xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<40x96xf32>) -> tensor<40x96xf32>
  %r = linalg.matmul ins(%a, %b : tensor<40x24xf32>, tensor<24x96xf32>)
                     outs(%acc : tensor<40x96xf32>) -> tensor<40x96xf32>
  return %r : tensor<40x96xf32>
}
