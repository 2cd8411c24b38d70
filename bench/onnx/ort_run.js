// Times one ONNX model under ONNX Runtime (npm onnxruntime-node, CPU provider), for
// bench/onnx_bench.py: node ort_run.js MODEL INPUT.bin DIMS(comma) THREADS RUNS
// Prints one JSON line: {"median_ms": ..., "min_ms": ..., "first": [...], "peak_mib": ...}.
const ort = require('onnxruntime-node');
const fs = require('fs');

async function main() {
  const [model, inputPath, dimsText, threadsText, runsText] = process.argv.slice(2);
  const threads = parseInt(threadsText, 10);
  const options = {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    // Spinning threads steal the other core from the peer being timed next (ONNX-NOTES.md).
    extra: {session: {intra_op: {allow_spinning: threads > 1 ? '0' : '1'}}},
  };
  const session = await ort.InferenceSession.create(model, options);
  const bytes = fs.readFileSync(inputPath);
  const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  const dims = dimsText.split(',').map(Number);
  const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', data, dims)};
  let out = await session.run(feeds);  // warm-up
  const times = [];
  for (let i = 0; i < parseInt(runsText, 10); ++i) {
    const start = process.hrtime.bigint();
    out = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  times.sort((a, b) => a - b);
  const first = Array.from(out[session.outputNames[0]].data.slice(0, 4));
  // This process's own high-water mark (VmHWM), not ru_maxrss, which includes the parent's memory
  // at fork time.
  const hwm = fs.readFileSync('/proc/self/status', 'utf8').match(/VmHWM:\s+(\d+)/);
  const peak_mib = hwm ? Number(hwm[1]) / 1024 : 0;
  console.log(JSON.stringify(
      {median_ms: times[Math.floor(times.length / 2)], min_ms: times[0], first, peak_mib}));
}
main().catch((e) => { console.error(e.message); process.exit(1); });
