// Calls two host callbacks the embedding program provides (`kiln run` ships both as built-ins).
module @with_callbacks {
  func.func private @kiln_print(tensor<4xf32>) attributes {kiln.host_callback}
  func.func private @kiln_record_sum(tensor<4xf32>) attributes {kiln.host_callback}
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = arith.addf %x, %x : tensor<4xf32>
    call @kiln_print(%y) : (tensor<4xf32>) -> ()
    call @kiln_record_sum(%x) : (tensor<4xf32>) -> ()
    return %y : tensor<4xf32>
  }
}
