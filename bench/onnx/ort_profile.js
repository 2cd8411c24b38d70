// Per-node times of one ONNX model under ONNX Runtime (npm onnxruntime-node, CPU provider, the
// same session options as ort_run.js), to compare with kiln's per-kernel profile
// (`kiln run MODEL --pgle --profile-out P`, then `kiln profile show P`):
//   NODE_PATH=build/bench-ort/node_modules node bench/onnx/ort_profile.js MODEL INPUT.bin DIMS THREADS RUNS [TOP]
// INPUT.bin holds the input's float32 values (numpy: x.astype('float32').tofile(path)).
// Prints the median run, the sum of node medians by operator type, and the TOP slowest nodes.
const ort = require('onnxruntime-node');
const fs = require('fs');
const os = require('os');
const path = require('path');

function median(values) {
  const sorted = values.slice().sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function main() {
  const [model, inputPath, dimsText, threadsText, runsText, topText] = process.argv.slice(2);
  const threads = parseInt(threadsText, 10);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-'));
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    extra: {session: {intra_op: {allow_spinning: threads > 1 ? '0' : '1'}}},
    enableProfiling: true,
    profileFilePrefix: path.join(dir, 'profile'),
  });
  const bytes = fs.readFileSync(inputPath);
  const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  const feeds = {
    [session.inputNames[0]]: new ort.Tensor('float32', data, dimsText.split(',').map(Number)),
  };
  for (let i = 0; i < parseInt(runsText, 10); ++i) await session.run(feeds);
  session.endProfiling();
  const file = fs.readdirSync(dir).find((name) => name.endsWith('.json'));
  const events = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
  fs.rmSync(dir, {recursive: true});
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run');
  const byNode = new Map();
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    if (!byNode.has(e.name)) byNode.set(e.name, {op: e.args.op_name, shapes: e.args.input_type_shape, times: []});
    byNode.get(e.name).times.push(e.dur);
  }
  const nodes = [...byNode.entries()].map(([name, n]) => ({name, op: n.op, shapes: n.shapes, us: median(n.times)}));
  nodes.sort((a, b) => b.us - a.us);
  const byOp = new Map();
  for (const n of nodes) byOp.set(n.op, (byOp.get(n.op) || 0) + n.us);
  console.log(`median run ${median(runs.map((e) => e.dur))} us over ${runs.length} runs; ` +
              `node medians sum to ${nodes.reduce((s, n) => s + n.us, 0)} us`);
  console.log('by operator: ' + [...byOp.entries()].map(([op, us]) => `${op} ${us} us`).join(', '));
  for (const n of nodes.slice(0, parseInt(topText || '25', 10))) {
    const shapes = (n.shapes || []).map((s) => Object.values(s)[0].join('x')).join(', ');
    console.log(`${String(n.us).padStart(7)} us  ${n.op.padEnd(10)} ${n.name.replace(/_kernel_time$/, '')}  [${shapes}]`);
  }
}
main().catch((e) => { console.error(e.message); process.exit(1); });
