// Eight small elementwise kernels, each writing its own slice of one result: too small to share
// out one by one, together enough work for two threads (parallel_loops.cc, share_segment).
// Slice p is x[p] * (p + 1) - x[7 - p].
module {
  func.func @slices(%x: tensor<8x64x600xf32>) -> tensor<8x64x600xf32> {
    %init = tensor.empty() : tensor<8x64x600xf32>
    %a0 = tensor.extract_slice %x[0, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %b0 = tensor.extract_slice %x[7, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %e0 = tensor.empty() : tensor<64x600xf32>
    %r0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                          iterator_types = ["parallel", "parallel"]}
        ins(%a0, %b0 : tensor<64x600xf32>, tensor<64x600xf32>) outs(%e0 : tensor<64x600xf32>) {
    ^bb0(%u: f32, %v: f32, %o: f32):
      %c = arith.constant 1.0 : f32
      %m = arith.mulf %u, %c : f32
      %s = arith.subf %m, %v : f32
      linalg.yield %s : f32
    } -> tensor<64x600xf32>
    %out0 = tensor.insert_slice %r0 into %init[0, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<64x600xf32> into tensor<8x64x600xf32>
    %a1 = tensor.extract_slice %x[1, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %b1 = tensor.extract_slice %x[6, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %e1 = tensor.empty() : tensor<64x600xf32>
    %r1 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                          iterator_types = ["parallel", "parallel"]}
        ins(%a1, %b1 : tensor<64x600xf32>, tensor<64x600xf32>) outs(%e1 : tensor<64x600xf32>) {
    ^bb0(%u: f32, %v: f32, %o: f32):
      %c = arith.constant 2.0 : f32
      %m = arith.mulf %u, %c : f32
      %s = arith.subf %m, %v : f32
      linalg.yield %s : f32
    } -> tensor<64x600xf32>
    %out1 = tensor.insert_slice %r1 into %out0[1, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<64x600xf32> into tensor<8x64x600xf32>
    %a2 = tensor.extract_slice %x[2, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %b2 = tensor.extract_slice %x[5, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %e2 = tensor.empty() : tensor<64x600xf32>
    %r2 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                          iterator_types = ["parallel", "parallel"]}
        ins(%a2, %b2 : tensor<64x600xf32>, tensor<64x600xf32>) outs(%e2 : tensor<64x600xf32>) {
    ^bb0(%u: f32, %v: f32, %o: f32):
      %c = arith.constant 3.0 : f32
      %m = arith.mulf %u, %c : f32
      %s = arith.subf %m, %v : f32
      linalg.yield %s : f32
    } -> tensor<64x600xf32>
    %out2 = tensor.insert_slice %r2 into %out1[2, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<64x600xf32> into tensor<8x64x600xf32>
    %a3 = tensor.extract_slice %x[3, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %b3 = tensor.extract_slice %x[4, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %e3 = tensor.empty() : tensor<64x600xf32>
    %r3 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                          iterator_types = ["parallel", "parallel"]}
        ins(%a3, %b3 : tensor<64x600xf32>, tensor<64x600xf32>) outs(%e3 : tensor<64x600xf32>) {
    ^bb0(%u: f32, %v: f32, %o: f32):
      %c = arith.constant 4.0 : f32
      %m = arith.mulf %u, %c : f32
      %s = arith.subf %m, %v : f32
      linalg.yield %s : f32
    } -> tensor<64x600xf32>
    %out3 = tensor.insert_slice %r3 into %out2[3, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<64x600xf32> into tensor<8x64x600xf32>
    %a4 = tensor.extract_slice %x[4, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %b4 = tensor.extract_slice %x[3, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %e4 = tensor.empty() : tensor<64x600xf32>
    %r4 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                          iterator_types = ["parallel", "parallel"]}
        ins(%a4, %b4 : tensor<64x600xf32>, tensor<64x600xf32>) outs(%e4 : tensor<64x600xf32>) {
    ^bb0(%u: f32, %v: f32, %o: f32):
      %c = arith.constant 5.0 : f32
      %m = arith.mulf %u, %c : f32
      %s = arith.subf %m, %v : f32
      linalg.yield %s : f32
    } -> tensor<64x600xf32>
    %out4 = tensor.insert_slice %r4 into %out3[4, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<64x600xf32> into tensor<8x64x600xf32>
    %a5 = tensor.extract_slice %x[5, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %b5 = tensor.extract_slice %x[2, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %e5 = tensor.empty() : tensor<64x600xf32>
    %r5 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                          iterator_types = ["parallel", "parallel"]}
        ins(%a5, %b5 : tensor<64x600xf32>, tensor<64x600xf32>) outs(%e5 : tensor<64x600xf32>) {
    ^bb0(%u: f32, %v: f32, %o: f32):
      %c = arith.constant 6.0 : f32
      %m = arith.mulf %u, %c : f32
      %s = arith.subf %m, %v : f32
      linalg.yield %s : f32
    } -> tensor<64x600xf32>
    %out5 = tensor.insert_slice %r5 into %out4[5, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<64x600xf32> into tensor<8x64x600xf32>
    %a6 = tensor.extract_slice %x[6, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %b6 = tensor.extract_slice %x[1, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %e6 = tensor.empty() : tensor<64x600xf32>
    %r6 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                          iterator_types = ["parallel", "parallel"]}
        ins(%a6, %b6 : tensor<64x600xf32>, tensor<64x600xf32>) outs(%e6 : tensor<64x600xf32>) {
    ^bb0(%u: f32, %v: f32, %o: f32):
      %c = arith.constant 7.0 : f32
      %m = arith.mulf %u, %c : f32
      %s = arith.subf %m, %v : f32
      linalg.yield %s : f32
    } -> tensor<64x600xf32>
    %out6 = tensor.insert_slice %r6 into %out5[6, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<64x600xf32> into tensor<8x64x600xf32>
    %a7 = tensor.extract_slice %x[7, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %b7 = tensor.extract_slice %x[0, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<8x64x600xf32> to tensor<64x600xf32>
    %e7 = tensor.empty() : tensor<64x600xf32>
    %r7 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                          iterator_types = ["parallel", "parallel"]}
        ins(%a7, %b7 : tensor<64x600xf32>, tensor<64x600xf32>) outs(%e7 : tensor<64x600xf32>) {
    ^bb0(%u: f32, %v: f32, %o: f32):
      %c = arith.constant 8.0 : f32
      %m = arith.mulf %u, %c : f32
      %s = arith.subf %m, %v : f32
      linalg.yield %s : f32
    } -> tensor<64x600xf32>
    %out7 = tensor.insert_slice %r7 into %out6[7, 0, 0] [1, 64, 600] [1, 1, 1] : tensor<64x600xf32> into tensor<8x64x600xf32>
    return %out7 : tensor<8x64x600xf32>
  }
}
