"""The Python package: kiln.compile, executables, the cache as an object, flags and errors.

Run by ctest (PythonPackage) with PYTHONPATH=build/python; KILN_TEST_PROGRAMS_DIR and
KILN_ONNX_MODELS_DIR name the test programs and the exported models."""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import kiln

PROGRAMS = os.environ["KILN_TEST_PROGRAMS_DIR"]
MODELS = os.environ.get("KILN_ONNX_MODELS_DIR", "")
MATMUL = os.path.join(PROGRAMS, "matmul_odd.mlir")
SCALARS = os.path.join(PROGRAMS, "runner", "scalar_results.mlir")


def operands(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((37, 53), dtype=np.float32),
            rng.standard_normal((53, 29), dtype=np.float32))


def run_python(code, **env):
    """Runs `code` in a fresh interpreter (this one's environment plus `env`)."""
    full_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, timeout=300)


def test_compile_a_path_then_call_with_numpy_arrays(tmp_path):
    cache = kiln.CompilationCache(tmp_path / "cache")
    exe = kiln.compile(MATMUL, cache=cache)
    assert exe.report["cache"] == "miss" and exe.report["compiled"]
    assert exe.entries == [{"name": "matmul", "inputs": ["tensor<37x53xf32>", "tensor<53x29xf32>"],
                            "outputs": ["tensor<37x29xf32>"]}]
    a, b = operands()
    out = exe(a, b)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (37, 29)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    again = kiln.compile(MATMUL, cache=cache)
    assert again.report["cache"] == "hit" and not again.report["compiled"]
    assert cache.stats()["misses"] == 1 and cache.stats()["hits"] >= 1


def test_text_bytes_and_serialized_executables_are_sources_too(tmp_path):
    text = open(MATMUL).read()
    a, b = operands(1)
    from_text = kiln.compile(text, cache=False)
    from_bytes = kiln.compile(text.encode(), cache=False)
    np.testing.assert_array_equal(from_text(a, b), from_bytes(a, b))
    kx = tmp_path / "matmul.kx"
    kx.write_bytes(from_text.serialize())
    loaded = kiln.compile(str(kx))
    assert not loaded.report["compiled"]
    np.testing.assert_array_equal(loaded(a, b), from_text(a, b))


def test_inputs_are_used_in_place_and_outputs_own_their_memory():
    exe = kiln.compile(MATMUL)
    a, b = operands(2)
    out = exe(a, b)
    del exe  # the result stays valid without the executable
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    # Not C-ordered: converted, same result.
    exe = kiln.compile(MATMUL)
    np.testing.assert_allclose(exe(np.asfortranarray(a), b), a @ b, rtol=1e-4, atol=1e-4)


def test_scalars_in_and_out_are_python_numbers():
    exe = kiln.compile(SCALARS)
    assert exe(entry="answer_i32") == 42
    assert exe(entry="answer_i64") == -9000000000
    assert exe(entry="answer_f32") == pytest.approx(3.375)
    assert exe(7, entry="takes_an_argument") == 7
    with pytest.raises(kiln.InvalidArgumentError, match="several entry functions"):
        exe()
    with pytest.raises(kiln.NotFoundError):
        exe(entry="no_such_function")


def test_wrong_count_dtype_and_shape_are_type_and_value_errors():
    exe = kiln.compile(MATMUL)
    a, b = operands()
    with pytest.raises(TypeError, match="takes 2 argument"):
        exe(a)
    with pytest.raises(TypeError, match="expected dtype float32"):
        exe(a.astype(np.float64), b)
    with pytest.raises(ValueError, match="expected shape tensor<37x53xf32>, given \\[3, 53\\]"):
        exe(a[:3], b)
    with pytest.raises(TypeError, match="expected a NumPy array"):
        exe([[1.0]], b)


def test_bad_programs_raise_kiln_errors_with_the_command_lines_message():
    with pytest.raises(kiln.InvalidArgumentError, match="<string>:1:14: error") as bad:
        kiln.compile("func.func @f( {")
    assert isinstance(bad.value, kiln.Error) and isinstance(bad.value, ValueError)
    with pytest.raises(kiln.NotFoundError, match="nonexistent.mlir"):
        kiln.compile("/nonexistent.mlir")
    unsupported = "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n" \
                  "  %r = \"test.unknown_op\"(%a) : (tensor<4xf32>) -> tensor<4xf32>\n" \
                  "  return %r : tensor<4xf32>\n}\n"
    with pytest.raises(kiln.Error):
        kiln.compile(unsupported, cache=False)
    with pytest.raises(TypeError, match="expected a path"):
        kiln.compile(42)


def test_compile_options_reach_the_key_and_unknown_ones_are_refused(tmp_path):
    cache = kiln.CompilationCache(tmp_path / "cache")
    plain = kiln.compile(MATMUL, cache=cache, optimization_level="O2")
    fewer = kiln.compile(MATMUL, cache=cache, optimization_level="O2",
                         disabled_passes=["linalg-fuse-elementwise-ops"])
    assert fewer.report["cache"] == "miss" and fewer.report["key"] != plain.report["key"]
    a, b = operands(4)
    np.testing.assert_allclose(fewer(a, b), plain(a, b), rtol=1e-5, atol=1e-5)
    with pytest.raises(kiln.Error, match="No such compile option"):
        kiln.compile(MATMUL, cache=cache, no_such_option=3)


def test_two_caches_never_see_each_others_entries(tmp_path):
    first = kiln.CompilationCache(tmp_path / "a")
    second = kiln.CompilationCache(tmp_path / "b")
    assert kiln.compile(MATMUL, cache=first).report["cache"] == "miss"
    assert kiln.compile(MATMUL, cache=second).report["cache"] == "miss"
    assert kiln.compile(MATMUL, cache=first).report["cache"] == "hit"
    assert first.directory.endswith("a") and second.directory.endswith("b")


def test_explain_names_the_key_its_parts_and_whether_it_is_stored(tmp_path):
    cache = kiln.CompilationCache(tmp_path / "cache")
    before = cache.explain(MATMUL, optimization_level="O1")
    assert not before["stored"]
    assert {c["name"] for c in before["components"]} >= {"module", "options"}
    exe = kiln.compile(MATMUL, optimization_level="O1", cache=cache)
    after = cache.explain(MATMUL, optimization_level="O1")
    assert after["stored"] and after["key"] == before["key"] == exe.report["key"]
    assert cache.explain(MATMUL, optimization_level="O2")["key"] != before["key"]
    if MODELS:
        mlp = os.path.join(MODELS, "mlp_opset17.onnx")
        assert not cache.explain(mlp)["stored"]
        model = kiln.compile(mlp, cache=cache)
        model(np.load(os.path.join(MODELS, "mlp.input.npy")))
        onnx_key = cache.explain(mlp)
        assert onnx_key["stored"] and onnx_key["key"] == model.report["key"]


def test_host_callbacks_are_python_callables():
    seen = []
    kiln.register_host_callback("kiln_print", lambda y: seen.append(("print", y.copy())))
    kiln.register_host_callback("kiln_record_sum", lambda x: seen.append(("sum", float(x.sum()))))
    try:
        exe = kiln.compile(os.path.join(PROGRAMS, "callbacks.mlir"))
        x = np.array([1, 2, 3, 4], np.float32)
        np.testing.assert_array_equal(exe(x), 2 * x)
        assert [name for name, _ in seen] == ["print", "sum"]
        np.testing.assert_array_equal(seen[0][1], 2 * x)
        assert seen[1][1] == 10.0

        def fails(_):
            raise RuntimeError("the sensor is unplugged")
        kiln.register_host_callback("kiln_record_sum", fails)
        with pytest.raises(kiln.Error, match="the sensor is unplugged"):
            exe(x)
    finally:
        kiln.unregister_host_callback("kiln_print")
        kiln.unregister_host_callback("kiln_record_sum")


def test_pgle_profiles_the_first_calls_then_recompiles_once_and_caches_the_result(tmp_path):
    program = os.path.join(PROGRAMS, "pgle_mlp.mlir")
    cache = kiln.CompilationCache(tmp_path / "cache", pgle=True)
    plain = kiln.compile(program, cache=False)
    entry = plain.entries[0]
    rng = np.random.default_rng(3)
    args = [rng.standard_normal([int(d) for d in t[len("tensor<"):-len("xf32>")].split("x")],
                                dtype=np.float32) for t in entry["inputs"]]
    want = plain(*args, entry=entry["name"])
    guided = kiln.compile(program, cache=cache, pgle=True)
    assert guided.profiling and guided.report["pgle"] == "first pass"
    runs = int(kiln.config["KILN_PGLE_PROFILING_RUNS"])
    for _ in range(runs + 1):
        np.testing.assert_allclose(guided(*args, entry=entry["name"]), want, rtol=1e-5, atol=1e-5)
    assert guided.recompiled and not guided.profiling
    assert guided.report["pgle"].startswith("optimised")
    again = kiln.compile(program, cache=cache, pgle=True)
    assert again.report["pgle"] == "optimised (cached)" and not again.profiling
    with pytest.raises(kiln.InvalidArgumentError, match="pgle=True"):
        kiln.compile(program, cache=kiln.CompilationCache(tmp_path / "plain"), pgle=True)


@pytest.fixture
def redis_url(tmp_path):
    """A real redis-server on a free loopback port, for the job's coordination."""
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    for _ in range(200):
        with socket.socket() as client:
            if client.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.02)
    yield f"redis://127.0.0.1:{port}"
    server.terminate()
    server.wait()


def test_processes_of_a_job_compile_once_and_share_the_result(tmp_path, redis_url):
    code = (
        "import sys, json, kiln, numpy as np\n"
        "pid = int(sys.argv[1])\n"
        f"kiln.distributed.initialize({redis_url!r}, num_processes=2, process_id=pid, job='py')\n"
        "kiln.config['KILN_SHARE_BINARY_BETWEEN_HOSTS'] = True\n"
        "assert kiln.distributed.context()['process_id'] == pid\n"
        f"exe = kiln.compile({MATMUL!r}, cache=kiln.CompilationCache({str(tmp_path)!r} + f'/c{{pid}}'))\n"
        "a = np.ones((37, 53), np.float32); b = np.ones((53, 29), np.float32)\n"
        "print(json.dumps({'shared': exe.report['shared'], 'compiled': exe.report['compiled'],\n"
        "                  'value': float(exe(a, b)[0, 0])}))\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(pid)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for pid in (0, 1)]
    import json
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    assert [r["shared"] for r in results] == ["leader", "follower"]
    assert [r["compiled"] for r in results] == [True, False]
    assert all(r["value"] == 53.0 for r in results)


def test_distributed_initialize_after_the_first_compile_is_refused():
    kiln.compile(MATMUL)
    with pytest.raises(kiln.InvalidArgumentError, match="before the first compile"):
        kiln.distributed.initialize("redis://127.0.0.1:1", 2, 0)
    assert kiln.distributed.context() is None


def test_flags_read_set_and_refused():
    old = kiln.config["KILN_EXPLAIN_CACHE_MISSES"]
    kiln.config["KILN_EXPLAIN_CACHE_MISSES"] = True
    assert kiln.config["KILN_EXPLAIN_CACHE_MISSES"] == "true"
    kiln.config["KILN_EXPLAIN_CACHE_MISSES"] = old
    flags = kiln.config.flags()
    assert flags["KILN_NUM_THREADS"]["in_key"] == "no"
    with pytest.raises(kiln.InvalidArgumentError, match="KILN_ENABLE_COMPILATION_CACHE"):
        kiln.config["KILN_ENABLE_COMPILATION_CACHE"] = "ture"
    with pytest.raises(kiln.Error):
        kiln.config["KILN_NO_SUCH_FLAG"] = 1


def test_the_gil_is_released_while_compiling(tmp_path):
    source = open(os.path.join(PROGRAMS, "pgle_mlp.mlir")).read()
    done = threading.Event()
    ticks = 0

    def compile_it():
        kiln.compile(source, optimization_level="O3", cache=False)
        done.set()

    worker = threading.Thread(target=compile_it)
    start = time.monotonic()
    worker.start()
    while not done.is_set():
        ticks += 1  # Python code running while the other thread compiles
        time.sleep(0.001)
    worker.join()
    elapsed = time.monotonic() - start
    # With the GIL held by the compile this loop could not run until it ended (a tick or two);
    # released, it ticks all along the compile.
    assert elapsed > 0.05, "the compile was too quick to tell"
    assert ticks >= 10


def test_a_warm_start_in_a_fresh_interpreter_loads_no_mlir_or_llvm(tmp_path):
    cache = str(tmp_path / "cache")
    code = (
        "import kiln, numpy as np\n"
        f"exe = kiln.compile({MATMUL!r}, cache=kiln.CompilationCache({cache!r}))\n"
        "a = np.ones((37, 53), np.float32); b = np.ones((53, 29), np.float32)\n"
        "assert float(exe(a, b)[0, 0]) == 53.0\n"
        "maps = open('/proc/self/maps').read()\n"
        "print(exe.report['cache'], 'libMLIR' in maps, 'libLLVM' in maps)\n")
    first = run_python(code)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split()[0] == "miss"
    warm = run_python(code)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout.split() == ["hit", "False", "False"]


@pytest.mark.skipif(not MODELS, reason="KILN_ONNX_MODELS_DIR is set by ctest's onnx fixture")
def test_onnx_models_run_and_match_pytorch():
    for name in ("mlp", "small_cnn"):
        model = kiln.compile(os.path.join(MODELS, f"{name}_opset17.onnx"))
        x = np.load(os.path.join(MODELS, f"{name}.input.npy"))
        want = np.load(os.path.join(MODELS, f"{name}.expected.npy"))
        np.testing.assert_allclose(model(x), want, rtol=1e-4, atol=1e-5)
        assert model.report["cache"] in ("hit", "miss")
        assert len(model.input_names) == 1
    onnx = pytest.importorskip("onnx")
    proto = onnx.load(os.path.join(MODELS, "mlp_opset17.onnx"))
    x = np.load(os.path.join(MODELS, "mlp.input.npy"))
    np.testing.assert_allclose(kiln.compile(proto)(x), np.load(os.path.join(MODELS, "mlp.expected.npy")),
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeError, match="takes 1 input"):
        model()


def test_the_pytorch_example_matches_pytorch_and_its_second_start_is_a_cache_hit(tmp_path):
    pytest.importorskip("torch")
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python",
                           "torch_to_kiln.py")
    runs = [subprocess.run([sys.executable, example, str(tmp_path)], capture_output=True,
                           text=True, timeout=600) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stdout + run.stderr
    assert runs[0].stdout.startswith("cache: miss")
    assert runs[1].stdout.startswith("cache: hit")


def test_pip_install_from_the_checkout_works_offline_and_is_self_contained(tmp_path):
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    target = tmp_path / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--quiet",
                              "--target", str(target), root],
                             capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stdout + install.stderr
    code = (
        "import kiln, numpy as np\n"
        f"exe = kiln.compile({MATMUL!r}, cache=False)\n"
        "a = np.ones((37, 53), np.float32); b = np.ones((53, 29), np.float32)\n"
        "print(kiln.__file__, float(exe(a, b)[0, 0]))\n")
    # Only the installed package on the path: the build tree's python/ directory is not.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    path, value = run.stdout.split()
    assert path.startswith(str(target)) and float(value) == 53.0
