// memref.realloc growing and shrinking a buffer the program frees itself: the contents up to the
// smaller size survive each move.
func.func private @printMemrefI32(memref<*xi32>)

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c9 = arith.constant 9 : index
  %c0_i32 = arith.constant 0 : i32
  %first = memref.alloc() : memref<5xi32>
  scf.for %i = %c0 to %c5 step %c1 {
    %v = arith.index_cast %i : index to i32
    %square = arith.muli %v, %v : i32
    memref.store %square, %first[%i] : memref<5xi32>
  }
  %grown = memref.realloc %first : memref<5xi32> to memref<9xi32>
  scf.for %i = %c5 to %c9 step %c1 {
    %v = arith.index_cast %i : index to i32
    %negative = arith.subi %c0_i32, %v : i32
    memref.store %negative, %grown[%i] : memref<9xi32>
  }
  %all = memref.cast %grown : memref<9xi32> to memref<*xi32>
  call @printMemrefI32(%all) : (memref<*xi32>) -> ()
  %dynamic = memref.cast %grown : memref<9xi32> to memref<?xi32>
  %shrunk = memref.realloc %dynamic(%c3) : memref<?xi32> to memref<?xi32>
  %some = memref.cast %shrunk : memref<?xi32> to memref<*xi32>
  call @printMemrefI32(%some) : (memref<*xi32>) -> ()
  memref.dealloc %shrunk : memref<?xi32>
  return
}
