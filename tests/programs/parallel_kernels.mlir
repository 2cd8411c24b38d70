// Kernels whose loops kiln runs on its thread pool: odd-sized matmuls (peeled register tiles,
// partial and evened-out cache tiles), a batched matmul, an elementwise map and a row reduction.
module @parallel_kernels {
  func.func @matmul(%a: tensor<301x203xf32>, %b: tensor<203x259xf32>) -> tensor<301x259xf32> {
    %zero = arith.constant 0.0 : f32
    %empty = tensor.empty() : tensor<301x259xf32>
    %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<301x259xf32>) -> tensor<301x259xf32>
    %r = linalg.matmul ins(%a, %b : tensor<301x203xf32>, tensor<203x259xf32>)
                       outs(%acc : tensor<301x259xf32>) -> tensor<301x259xf32>
    return %r : tensor<301x259xf32>
  }

  // Two 48-row tiles rather than 64 and 32 rows; the threads share out the 9 column tiles.
  func.func @matmul_few_rows(%a: tensor<96x40xf32>, %b: tensor<40x1100xf32>) -> tensor<96x1100xf32> {
    %zero = arith.constant 0.0 : f32
    %empty = tensor.empty() : tensor<96x1100xf32>
    %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<96x1100xf32>) -> tensor<96x1100xf32>
    %r = linalg.matmul ins(%a, %b : tensor<96x40xf32>, tensor<40x1100xf32>)
                       outs(%acc : tensor<96x1100xf32>) -> tensor<96x1100xf32>
    return %r : tensor<96x1100xf32>
  }

  // One row tile: the threads share out column tiles of 96 (96 and 54 columns, not 128 and 22).
  func.func @matmul_narrow(%a: tensor<49x160xf32>, %b: tensor<160x150xf32>) -> tensor<49x150xf32> {
    %zero = arith.constant 0.0 : f32
    %empty = tensor.empty() : tensor<49x150xf32>
    %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<49x150xf32>) -> tensor<49x150xf32>
    %r = linalg.matmul ins(%a, %b : tensor<49x160xf32>, tensor<160x150xf32>)
                       outs(%acc : tensor<49x150xf32>) -> tensor<49x150xf32>
    return %r : tensor<49x150xf32>
  }

  func.func @batch_matmul(%a: tensor<3x130x70xf32>, %b: tensor<3x70x190xf32>) -> tensor<3x130x190xf32> {
    %zero = arith.constant 0.0 : f32
    %empty = tensor.empty() : tensor<3x130x190xf32>
    %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<3x130x190xf32>) -> tensor<3x130x190xf32>
    %r = linalg.batch_matmul ins(%a, %b : tensor<3x130x70xf32>, tensor<3x70x190xf32>)
                             outs(%acc : tensor<3x130x190xf32>) -> tensor<3x130x190xf32>
    return %r : tensor<3x130x190xf32>
  }

  func.func @map(%x: tensor<517x1031xf32>) -> tensor<517x1031xf32> {
    %empty = tensor.empty() : tensor<517x1031xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                         iterator_types = ["parallel", "parallel"]}
        ins(%x : tensor<517x1031xf32>) outs(%empty : tensor<517x1031xf32>) {
    ^bb0(%v: f32, %o: f32):
      %t = math.tanh %v : f32
      %s = arith.mulf %t, %v : f32
      linalg.yield %s : f32
    } -> tensor<517x1031xf32>
    return %r : tensor<517x1031xf32>
  }

  func.func @row_sums(%x: tensor<777x513xf32>) -> tensor<777xf32> {
    %zero = arith.constant 0.0 : f32
    %empty = tensor.empty() : tensor<777xf32>
    %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<777xf32>) -> tensor<777xf32>
    %r = linalg.reduce ins(%x : tensor<777x513xf32>) outs(%acc : tensor<777xf32>) dimensions = [1]
      (%v: f32, %a: f32) {
        %s = arith.addf %v, %a : f32
        linalg.yield %s : f32
      }
    return %r : tensor<777xf32>
  }
}
