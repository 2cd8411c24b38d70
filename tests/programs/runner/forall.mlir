// A program's own scf.forall: independent tiles written into one tensor (lowered to a parallel
// loop, which kiln's thread pool may share out from O1 on).
func.func private @printMemrefF32(tensor<*xf32>)

func.func @main() {
  %empty = tensor.empty() : tensor<6x10xf32>
  %table = scf.forall (%i, %j) in (3, 5) shared_outs(%out = %empty) -> (tensor<6x10xf32>) {
    %tile = tensor.empty() : tensor<2x2xf32>
    %c2 = arith.constant 2 : index
    %c10 = arith.constant 10 : index
    %row0 = arith.muli %i, %c2 : index
    %col0 = arith.muli %j, %c2 : index
    %filled = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>],
                              iterator_types = ["parallel", "parallel"]}
        outs(%tile : tensor<2x2xf32>) {
      ^bb0(%o: f32):
        %r = linalg.index 0 : index
        %c = linalg.index 1 : index
        %row = arith.addi %row0, %r : index
        %col = arith.addi %col0, %c : index
        %ten = arith.muli %row, %c10 : index
        %v = arith.addi %ten, %col : index
        %vi = arith.index_cast %v : index to i32
        %vf = arith.sitofp %vi : i32 to f32
        linalg.yield %vf : f32
    } -> tensor<2x2xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %filled into %out[%row0, %col0] [2, 2] [1, 1]
          : tensor<2x2xf32> into tensor<6x10xf32>
    }
  }
  %printable = tensor.cast %table : tensor<6x10xf32> to tensor<*xf32>
  call @printMemrefF32(%printable) : (tensor<*xf32>) -> ()
  return
}
