// Memref-level program in mlir-runner's style: fills buffers with loops and prints them.
func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}
func.func private @printMemrefI32(memref<*xi32>) attributes {llvm.emit_c_interface}

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %m = memref.alloc() : memref<3x4xf32>
  %mi = memref.alloc() : memref<3x4xi32>
  scf.for %i = %c0 to %c3 step %c1 {
    scf.for %j = %c0 to %c4 step %c1 {
      %ij = arith.muli %i, %c4 : index
      %lin = arith.addi %ij, %j : index
      %v = arith.index_cast %lin : index to i32
      %f = arith.sitofp %v : i32 to f32
      %half = arith.constant 0.5 : f32
      %g = arith.mulf %f, %half : f32
      memref.store %g, %m[%i, %j] : memref<3x4xf32>
      %sq = arith.muli %v, %v : i32
      memref.store %sq, %mi[%i, %j] : memref<3x4xi32>
    }
  }
  %u = memref.cast %m : memref<3x4xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  %ui = memref.cast %mi : memref<3x4xi32> to memref<*xi32>
  call @printMemrefI32(%ui) : (memref<*xi32>) -> ()
  // A strided view: column 1 of every row.
  %col = memref.subview %m[0, 1] [3, 1] [1, 1] : memref<3x4xf32> to memref<3x1xf32, strided<[4, 1], offset: 1>>
  %ucol = memref.cast %col : memref<3x1xf32, strided<[4, 1], offset: 1>> to memref<*xf32>
  call @printMemrefF32(%ucol) : (memref<*xf32>) -> ()
  %s = memref.alloc() : memref<f32>
  %pi = arith.constant 3.25 : f32
  memref.store %pi, %s[] : memref<f32>
  %us = memref.cast %s : memref<f32> to memref<*xf32>
  call @printMemrefF32(%us) : (memref<*xf32>) -> ()
  %vec = vector.load %m[%c1, %c0] : memref<3x4xf32>, vector<4xf32>
  vector.print %vec : vector<4xf32>
  %e = arith.constant 7 : i64
  vector.print %e : i64
  memref.dealloc %m : memref<3x4xf32>
  memref.dealloc %mi : memref<3x4xi32>
  memref.dealloc %s : memref<f32>
  return
}
