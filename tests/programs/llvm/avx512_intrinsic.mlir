// Calls an AVX-512 intrinsic directly: LLVM cannot select it for a CPU without AVX-512 and
// reports a fatal error (kiln must turn it into a compile error).
func.func @main(%in: memref<16xf32>, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %a = vector.load %in[%c0] : memref<16xf32>, vector<16xf32>
  %all = arith.constant -1 : i16
  %r = llvm.call_intrinsic "llvm.x86.avx512.rsqrt14.ps.512"(%a, %a, %all)
      : (vector<16xf32>, vector<16xf32>, i16) -> vector<16xf32>
  vector.store %r, %out[%c0] : memref<16xf32>, vector<16xf32>
  return
}
