// Products with fewer rows than a cache tile that 8 does not divide: kiln fits the register tile's
// rows to them (7, 6 and 5 rows), with columns that leave a remainder too.
func.func @rows49(%a: tensor<49x70xf32>, %b: tensor<70x45xf32>) -> tensor<49x45xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<49x45xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<49x45xf32>) -> tensor<49x45xf32>
  %r = linalg.matmul ins(%a, %b : tensor<49x70xf32>, tensor<70x45xf32>)
                     outs(%acc : tensor<49x45xf32>) -> tensor<49x45xf32>
  return %r : tensor<49x45xf32>
}

func.func @rows30(%a: tensor<30x70xf32>, %b: tensor<70x45xf32>) -> tensor<30x45xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<30x45xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<30x45xf32>) -> tensor<30x45xf32>
  %r = linalg.matmul ins(%a, %b : tensor<30x70xf32>, tensor<70x45xf32>)
                     outs(%acc : tensor<30x45xf32>) -> tensor<30x45xf32>
  return %r : tensor<30x45xf32>
}

func.func @rows25(%a: tensor<25x70xf32>, %b: tensor<70x45xf32>) -> tensor<25x45xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<25x45xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<25x45xf32>) -> tensor<25x45xf32>
  %r = linalg.matmul ins(%a, %b : tensor<25x70xf32>, tensor<70x45xf32>)
                     outs(%acc : tensor<25x45xf32>) -> tensor<25x45xf32>
  return %r : tensor<25x45xf32>
}
