// Row sums with linalg.reduce and column maxima with a TOSA reduction.
func.func @reductions(%x: tensor<13x17xf32>) -> (tensor<13xf32>, tensor<1x17xf32>) {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<13xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<13xf32>) -> tensor<13xf32>
  %sum = linalg.reduce ins(%x : tensor<13x17xf32>) outs(%acc : tensor<13xf32>) dimensions = [1]
    (%in: f32, %out: f32) {
      %s = arith.addf %in, %out : f32
      linalg.yield %s : f32
    }
  %max = tosa.reduce_max %x {axis = 0 : i32} : (tensor<13x17xf32>) -> tensor<1x17xf32>
  return %sum, %max : tensor<13xf32>, tensor<1x17xf32>
}
