// x86vector ops (AVX's dot product, on every x86-64 CPU kiln targets with AVX) lower to LLVM's
// x86 intrinsics.
func.func @main() {
  %a = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : vector<8xf32>
  %b = arith.constant dense<[1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]> : vector<8xf32>
  %d = x86vector.avx.intr.dot %a, %b : vector<8xf32>
  vector.print %d : vector<8xf32>
  return
}
