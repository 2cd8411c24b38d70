// Reads past the end of a 4-element buffer: with --verify-runtime the run stops with
// mlir-runner's run-time verification message.
func.func @main() {
  %c5 = arith.constant 5 : index
  %m = memref.alloca() : memref<4xf32>
  %v = memref.load %m[%c5] : memref<4xf32>
  vector.print %v : f32
  return
}
