// Numerically stable softmax over the last axis, in TOSA.
func.func @softmax(%x: tensor<6x33xf32>) -> tensor<6x33xf32> {
  %max = tosa.reduce_max %x {axis = 1 : i32} : (tensor<6x33xf32>) -> tensor<6x1xf32>
  %shifted = tosa.sub %x, %max : (tensor<6x33xf32>, tensor<6x1xf32>) -> tensor<6x33xf32>
  %e = tosa.exp %shifted : (tensor<6x33xf32>) -> tensor<6x33xf32>
  %sum = tosa.reduce_sum %e {axis = 1 : i32} : (tensor<6x33xf32>) -> tensor<6x1xf32>
  %inv = tosa.reciprocal %sum : (tensor<6x1xf32>) -> tensor<6x1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %r = tosa.mul %e, %inv, %shift : (tensor<6x33xf32>, tensor<6x1xf32>, tensor<1xi8>) -> tensor<6x33xf32>
  return %r : tensor<6x33xf32>
}
