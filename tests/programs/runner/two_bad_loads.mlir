// Two loads past the end of their buffers between good ones: with --verify-runtime-continue each
// bad load is reported and the program runs on to the end.
func.func @load(%m: memref<?xf32>, %i: index) -> f32 {
  %v = memref.load %m[%i] : memref<?xf32>
  return %v : f32
}

func.func @main() {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c7 = arith.constant 7 : index
  %one = arith.constant 1.5 : f32
  %m = memref.alloc(%c4) : memref<?xf32>
  memref.store %one, %m[%c1] : memref<?xf32>
  %a = func.call @load(%m, %c1) : (memref<?xf32>, index) -> f32
  vector.print %a : f32
  %b = func.call @load(%m, %c4) : (memref<?xf32>, index) -> f32
  %c = func.call @load(%m, %c7) : (memref<?xf32>, index) -> f32
  %d = func.call @load(%m, %c1) : (memref<?xf32>, index) -> f32
  vector.print %d : f32
  memref.dealloc %m : memref<?xf32>
  return
}
