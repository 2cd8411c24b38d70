// Vector tiles read and written in place across a loop, the way a contraction's accumulator is.
// At O2 kiln carries such a tile in registers through the loop; here one tile is also read and
// written through a view of the same buffer inside the loop (it must stay in memory), and one is
// alone on its buffer (it may move). Both must print what mlir-runner prints.
func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %one = arith.constant 1.0 : f32
  %pad = arith.constant 0.0 : f32

  // Row 0 is the tile; the view is row 0 again. Each iteration writes tile + view, then the view
  // writes the old tile back: the buffer keeps its ones.
  %aliased = memref.alloc() : memref<2x8xf32>
  linalg.fill ins(%one : f32) outs(%aliased : memref<2x8xf32>)
  %row0 = memref.subview %aliased[0, 0] [1, 8] [1, 1]
      : memref<2x8xf32> to memref<8xf32, strided<[1]>>
  scf.for %i = %c0 to %c5 step %c1 {
    %tile = vector.transfer_read %aliased[%c0, %c0], %pad {in_bounds = [true]}
        : memref<2x8xf32>, vector<8xf32>
    %other = vector.transfer_read %row0[%c0], %pad {in_bounds = [true]}
        : memref<8xf32, strided<[1]>>, vector<8xf32>
    %sum = arith.addf %tile, %other : vector<8xf32>
    vector.transfer_write %sum, %aliased[%c0, %c0] {in_bounds = [true]}
        : vector<8xf32>, memref<2x8xf32>
    vector.transfer_write %tile, %row0[%c0] {in_bounds = [true]}
        : vector<8xf32>, memref<8xf32, strided<[1]>>
  }
  %a = memref.cast %aliased : memref<2x8xf32> to memref<*xf32>
  call @printMemrefF32(%a) : (memref<*xf32>) -> ()

  // A tile alone on its buffer, doubled five times, with the loop index added.
  %alone = memref.alloc() : memref<2x8xf32>
  linalg.fill ins(%one : f32) outs(%alone : memref<2x8xf32>)
  scf.for %i = %c0 to %c5 step %c1 {
    %tile = vector.transfer_read %alone[%c1, %c0], %pad {in_bounds = [true]}
        : memref<2x8xf32>, vector<8xf32>
    %twice = arith.addf %tile, %tile : vector<8xf32>
    %ii = arith.index_cast %i : index to i32
    %fi = arith.sitofp %ii : i32 to f32
    %step = vector.broadcast %fi : f32 to vector<8xf32>
    %next = arith.addf %twice, %step : vector<8xf32>
    vector.transfer_write %next, %alone[%c1, %c0] {in_bounds = [true]}
        : vector<8xf32>, memref<2x8xf32>
  }
  %b = memref.cast %alone : memref<2x8xf32> to memref<*xf32>
  call @printMemrefF32(%b) : (memref<*xf32>) -> ()
  memref.dealloc %aliased : memref<2x8xf32>
  memref.dealloc %alone : memref<2x8xf32>
  return
}
