// verifyMemRef (counts differing elements; lists them on stderr) and the ranked printMemref
// variants ("Memref" rather than "Unranked Memref").
func.func private @verifyMemRefF32(memref<*xf32>, memref<*xf32>) -> i64 attributes { llvm.emit_c_interface }
func.func private @verifyMemRefI32(memref<*xi32>, memref<*xi32>) -> i64 attributes { llvm.emit_c_interface }
func.func private @printMemref2dF32(memref<2x3xf32>) attributes { llvm.emit_c_interface }
func.func private @printMemref1dI64(memref<3xi64>) attributes { llvm.emit_c_interface }
func.func private @printMemref0dF32(memref<f32>) attributes { llvm.emit_c_interface }
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %a = memref.alloca() : memref<2x3xf32>
  %b = memref.alloca() : memref<2x3xf32>
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  linalg.fill ins(%one : f32) outs(%a : memref<2x3xf32>)
  linalg.fill ins(%one : f32) outs(%b : memref<2x3xf32>)
  memref.store %two, %b[%c1, %c2] : memref<2x3xf32>
  %ua = memref.cast %a : memref<2x3xf32> to memref<*xf32>
  %ub = memref.cast %b : memref<2x3xf32> to memref<*xf32>
  %e = call @verifyMemRefF32(%ua, %ub) : (memref<*xf32>, memref<*xf32>) -> i64
  vector.print %e : i64
  %e2 = call @verifyMemRefF32(%ua, %ua) : (memref<*xf32>, memref<*xf32>) -> i64
  vector.print %e2 : i64
  call @printMemref2dF32(%a) : (memref<2x3xf32>) -> ()
  %i = memref.alloca() : memref<3xi64>
  %k = arith.constant 7 : i64
  linalg.fill ins(%k : i64) outs(%i : memref<3xi64>)
  call @printMemref1dI64(%i) : (memref<3xi64>) -> ()
  %z = memref.alloca() : memref<f32>
  memref.store %two, %z[] : memref<f32>
  call @printMemref0dF32(%z) : (memref<f32>) -> ()
  return
}
