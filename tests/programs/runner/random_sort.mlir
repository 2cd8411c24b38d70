// The runner utilities' random numbers (a seeded generator), shuffle, sort and the
// vector<4x4xf32> memref printer: a seed gives the same numbers under kiln as under mlir-runner.
func.func private @rtsrand(i64) -> !llvm.ptr
func.func private @rtrand(!llvm.ptr, i64) -> i64
func.func private @rtdrand(!llvm.ptr)
func.func private @shuffle(memref<?xi64>, !llvm.ptr) attributes {llvm.emit_c_interface}
func.func private @stdSortI64(i64, memref<?xi64>) attributes {llvm.emit_c_interface}
func.func private @stdSortF64(i64, memref<?xf64>) attributes {llvm.emit_c_interface}
func.func private @printMemrefI64(memref<*xi64>) attributes {llvm.emit_c_interface}
func.func private @printMemrefF64(memref<*xf64>) attributes {llvm.emit_c_interface}
func.func private @printMemrefVector4x4xf32(memref<?x?xvector<4x4xf32>>) attributes {llvm.emit_c_interface}
func.func private @mlirAlignedAlloc(i64, i64) -> !llvm.ptr
func.func private @mlirAlignedFree(!llvm.ptr)

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %seed = arith.constant 42 : i64
  %range = arith.constant 100 : i64
  %g = call @rtsrand(%seed) : (i64) -> !llvm.ptr
  scf.for %i = %c0 to %c10 step %c1 {
    %r = func.call @rtrand(%g, %range) : (!llvm.ptr, i64) -> i64
    vector.print %r : i64
  }
  %perm = memref.alloc(%c10) : memref<?xi64>
  call @shuffle(%perm, %g) : (memref<?xi64>, !llvm.ptr) -> ()
  %perm_u = memref.cast %perm : memref<?xi64> to memref<*xi64>
  call @printMemrefI64(%perm_u) : (memref<*xi64>) -> ()
  // Sort the first seven values only.
  %seven = arith.constant 7 : i64
  call @stdSortI64(%seven, %perm) : (i64, memref<?xi64>) -> ()
  call @printMemrefI64(%perm_u) : (memref<*xi64>) -> ()
  %f = memref.alloc(%c10) : memref<?xf64>
  scf.for %i = %c0 to %c10 step %c1 {
    %v = memref.load %perm[%i] : memref<?xi64>
    %d = arith.sitofp %v : i64 to f64
    %half = arith.constant 0.5 : f64
    %w = arith.subf %half, %d : f64
    memref.store %w, %f[%i] : memref<?xf64>
  }
  %ten = arith.constant 10 : i64
  call @stdSortF64(%ten, %f) : (i64, memref<?xf64>) -> ()
  %f_u = memref.cast %f : memref<?xf64> to memref<*xf64>
  call @printMemrefF64(%f_u) : (memref<*xf64>) -> ()
  call @rtdrand(%g) : (!llvm.ptr) -> ()

  %tiles = memref.alloc() : memref<2x2xvector<4x4xf32>>
  %base = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0],
                                 [9.0, 10.0, 11.0, 12.5], [13.0, 14.0, 15.0, 16.25]]> : vector<4x4xf32>
  %step = arith.constant dense<100.0> : vector<4x4xf32>
  %t1 = arith.addf %base, %step : vector<4x4xf32>
  %t2 = arith.addf %t1, %step : vector<4x4xf32>
  %t3 = arith.addf %t2, %step : vector<4x4xf32>
  memref.store %base, %tiles[%c0, %c0] : memref<2x2xvector<4x4xf32>>
  memref.store %t1, %tiles[%c0, %c1] : memref<2x2xvector<4x4xf32>>
  memref.store %t2, %tiles[%c1, %c0] : memref<2x2xvector<4x4xf32>>
  memref.store %t3, %tiles[%c1, %c1] : memref<2x2xvector<4x4xf32>>
  %tiles_d = memref.cast %tiles : memref<2x2xvector<4x4xf32>> to memref<?x?xvector<4x4xf32>>
  call @printMemrefVector4x4xf32(%tiles_d) : (memref<?x?xvector<4x4xf32>>) -> ()
  memref.dealloc %tiles : memref<2x2xvector<4x4xf32>>

  // An aligned allocation is aligned: prints 0.
  %alignment = arith.constant 256 : i64
  %bytes = arith.constant 1000 : i64
  %p = call @mlirAlignedAlloc(%alignment, %bytes) : (i64, i64) -> !llvm.ptr
  %address = llvm.ptrtoint %p : !llvm.ptr to i64
  %misalignment = arith.remui %address, %alignment : i64
  vector.print %misalignment : i64
  call @mlirAlignedFree(%p) : (!llvm.ptr) -> ()
  memref.dealloc %perm : memref<?xi64>
  memref.dealloc %f : memref<?xf64>
  return
}
