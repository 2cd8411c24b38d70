"""kiln: compile ML tensor programs (MLIR, ONNX) once, run them from the cache.

    import kiln, numpy as np
    exe = kiln.compile("model.mlir")          # or MLIR text/bytes, .onnx, ONNX bytes, .kx
    y = exe(np.ones((4, 4), np.float32))
    exe.report["cache"]                        # "hit", "miss" or "off"

Importing kiln loads libkiln only; MLIR and LLVM are loaded by the first compile that misses the
cache. Compiles and runs release the GIL.
"""

import os as _os

from . import _kiln

__all__ = [
    "compile", "Executable", "OnnxExecutable", "ProfileGuidedExecutable", "CompilationCache",
    "config",
    "register_host_callback", "unregister_host_callback", "distributed",
    "Error", "InvalidArgumentError", "NotFoundError", "UnimplementedError", "CompileError",
    "IOError_", "CorruptionError", "InternalError", "PermissionDeniedError",
    "ResourceExhaustedError", "DeadlineExceededError", "UnavailableError",
    "AlreadyExistsError",
]


class Error(Exception):
    """A kiln error; the message is the command line's."""

    code = "Internal"


class InvalidArgumentError(Error, ValueError):
    code = "InvalidArgument"


class NotFoundError(Error, FileNotFoundError):
    code = "NotFound"


class UnimplementedError(Error, NotImplementedError):
    code = "Unimplemented"


class CompileError(Error):
    code = "CompileError"


class IOError_(Error, OSError):
    code = "IoError"


class CorruptionError(Error):
    code = "Corruption"


class InternalError(Error):
    code = "Internal"


class PermissionDeniedError(Error, PermissionError):
    code = "PermissionDenied"


class ResourceExhaustedError(Error, MemoryError):
    code = "ResourceExhausted"


class DeadlineExceededError(Error, TimeoutError):
    code = "DeadlineExceeded"


class UnavailableError(Error, ConnectionError):
    code = "Unavailable"


class AlreadyExistsError(Error, FileExistsError):
    code = "AlreadyExists"


_ERRORS = {cls.code: cls for cls in (
    InvalidArgumentError, NotFoundError, UnimplementedError, CompileError, IOError_,
    CorruptionError, InternalError, PermissionDeniedError, ResourceExhaustedError,
    DeadlineExceededError, UnavailableError, AlreadyExistsError)}


def _raising_kiln_errors(function):
    """Turns the extension's StatusError(code, message) into the kiln.Error subclass of its code."""
    import functools

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except _kiln.StatusError as error:
            code, message = error.args
            raise _ERRORS.get(code, Error)(message) from None
    return wrapper


class CompilationCache:
    """A compilation cache of its own: directory, bounds, remote tier (see docs/CACHE.md).

    Two caches never see each other's entries. Without one, kiln.compile uses the process default,
    configured by the KILN_* flags (kiln.config)."""

    @_raising_kiln_errors
    def __init__(self, directory="", *, max_size=-1, max_entries=-1, remote="", enabled=True,
                 pgle=False):
        # Unset values (empty, -1) come from the KILN_* flags.
        self._cache = _kiln.open_cache(str(directory), int(max_size), int(max_entries),
                                       str(remote), bool(enabled), bool(pgle))
        self._pgle = bool(pgle) or config["KILN_ENABLE_PGLE"] == "true"

    @property
    def directory(self):
        return self._cache.directory()

    def stats(self):
        """This cache's counters since it was opened: requests, hits, misses, writes, ..."""
        return dict(self._cache.counters())

    @_raising_kiln_errors
    def explain(self, source, *, optimization_level="UNKNOWN", disabled_passes=(), **options):
        """The key a program (MLIR, or an ONNX model at its declared input shapes) would have
        here: {"key", "module", "components" (name, digest, description of each part),
        "stored" (whether this cache holds it)}."""
        data, name, directory, kind = _source_bytes(source)
        return _kiln.explain(self._cache, data, name, directory, kind == "onnx",
                             _options(optimization_level, disabled_passes, options))


class Executable:
    """A loaded program: call it with NumPy arrays (and Python numbers for scalar arguments)."""

    def __init__(self, native):
        self._native = native
        self.report = native.report()

    @property
    def entries(self):
        """Each entry function: {"name", "inputs", "outputs"} with types as MLIR spells them."""
        return self._native.entries()

    @property
    def optimization_level(self):
        return self._native.effort_level()

    @_raising_kiln_errors
    def __call__(self, *arrays, entry=None):
        return self._native.call(entry or "", *arrays)

    def serialize(self):
        """The executable as bytes (a .kx file): kiln.compile loads it without compiling."""
        return self._native.serialize()


class ProfileGuidedExecutable:
    """A program compiled with pgle=True: its first calls are profiled (KILN_PGLE_PROFILING_RUNS),
    then it is recompiled once with the profile, and later calls run the optimised build (or find
    it in the cache straight away)."""

    def __init__(self, native):
        self._native = native

    @property
    def entries(self):
        return self._native.entries()

    @property
    def profiling(self):
        return self._native.profiling()

    @property
    def recompiled(self):
        return self._native.recompiles() > 0

    @property
    def report(self):
        """The report of the executable in use: the first compile's, then the recompile's."""
        return self._native.last_report()

    @_raising_kiln_errors
    def __call__(self, *arrays, entry=None):
        return self._native.call(entry or "", *arrays)


class OnnxExecutable:
    """An ONNX model: compiled for the input shapes of its first call (and again per new shape)."""

    def __init__(self, native):
        self._native = native

    @property
    def input_names(self):
        return self._native.input_names()

    @property
    def output_names(self):
        return self._native.output_names()

    @property
    def report(self):
        """What the last compile (the first call at a new shape) found: cache, key, timings."""
        return self._native.report()

    @_raising_kiln_errors
    def __call__(self, *arrays):
        return self._native.call(*arrays)


def _source_bytes(source):
    """(bytes, name, directory, kind) of a path, MLIR text, bytes or an ONNX ModelProto."""
    if hasattr(source, "SerializeToString"):  # an onnx.ModelProto
        return source.SerializeToString(), "<ModelProto>", _os.getcwd(), "onnx"
    if isinstance(source, _os.PathLike) or (isinstance(source, str) and "\n" not in source and
                                            _os.path.splitext(source)[1] in
                                            (".mlir", ".mlirbc", ".onnx", ".kx")):
        path = _os.fspath(source)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as error:
            raise NotFoundError(f"{path}: cannot read the program: {error.strerror}") from None
        kind = "onnx" if path.endswith(".onnx") else "mlir"
        return data, path, _os.path.dirname(_os.path.abspath(path)), kind
    if isinstance(source, str):
        return source.encode(), "<string>", _os.getcwd(), "mlir"
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        # ONNX ModelProto bytes start with ir_version (field 1, varint).
        kind = "onnx" if data[:1] == b"\x08" else "mlir"
        return data, "<bytes>", _os.getcwd(), kind
    raise TypeError("kiln.compile: expected a path, MLIR text or bytes, ONNX bytes or an "
                    f"onnx.ModelProto, given {type(source).__name__}")


def _options(optimization_level, disabled_passes, overrides):
    options = _kiln.CompileOptions()
    options.optimization_level = str(optimization_level)
    options.disabled_passes = [str(p) for p in disabled_passes]
    options.overrides = [(str(k), "true" if v is True else "false" if v is False else str(v))
                         for k, v in overrides.items()]
    return options


@_raising_kiln_errors
def compile(source, *, optimization_level="UNKNOWN", cache=True, pgle=False, disabled_passes=(),
            **options):
    """Compiles (or finds in the cache) a program and returns it loaded.

    source: a path to .mlir/.mlirbc/.onnx/.kx, MLIR text or bytes, ONNX ModelProto bytes or an
    onnx.ModelProto. optimization_level: "O0".."O3" (default: KILN_OPTIMIZATION_LEVEL).
    cache: True (the process default cache), False (compile every time) or a CompilationCache.
    pgle: profile the first calls, then recompile once with the profile (MLIR programs; returns a
    ProfileGuidedExecutable). With cache=True it goes through a PGLE-enabled cache on the default
    directory.
    disabled_passes: pipeline passes to leave out (`kiln pipeline` lists them).
    **options: compile option overrides by name (part of the key); a name kiln does not know is
    refused ("No such compile option"), as JAX refuses it.
    """
    data, name, directory, kind = _source_bytes(source)
    if cache is True:
        native_cache = None
    elif cache is False:
        native_cache = _kiln.open_cache("", -1, -1, "", False, bool(pgle))
    elif isinstance(cache, CompilationCache):
        native_cache = cache._cache
    else:
        raise TypeError("cache: expected True, False or a kiln.CompilationCache")
    level = _options(optimization_level, disabled_passes, options)
    if pgle:
        if kind != "mlir":
            raise UnimplementedError("pgle=True takes MLIR programs; ONNX models are not profiled "
                                     "yet")
        if native_cache is None:
            native_cache = _kiln.open_cache("", -1, -1, "", True, True)
        elif isinstance(cache, CompilationCache) and not cache._pgle:
            raise InvalidArgumentError("pgle=True needs a cache opened with pgle=True")
        return ProfileGuidedExecutable(_kiln.compile_pgle(data, name, level, native_cache))
    if kind == "onnx":
        return OnnxExecutable(_kiln.load_onnx(data, name, directory, level, native_cache))
    return Executable(_kiln.compile_mlir(data, name, level, native_cache))


def register_host_callback(name, function):
    """Provides the host callback `name` (a module's `func.func private @name(...) attributes
    {kiln.host_callback}`): `function(*arrays)` is called with copies of the arguments each time
    the program calls it; an exception it raises fails that call with a kiln.Error. Registering a
    name again replaces the function; executables look the name up at every call."""
    if not callable(function):
        raise TypeError("register_host_callback: function must be callable")
    _kiln.register_host_callback(str(name), function)


def unregister_host_callback(name):
    _kiln.unregister_host_callback(str(name))


class _Config:
    """Every KILN_* flag: kiln.config["KILN_NUM_THREADS"] = 2, kiln.config.flags()."""

    @_raising_kiln_errors
    def __getitem__(self, name):
        return _kiln.config_get(name)

    @_raising_kiln_errors
    def __setitem__(self, name, value):
        if isinstance(value, bool):
            value = "true" if value else "false"
        _kiln.config_set(name, str(value))

    get = __getitem__
    set = __setitem__

    def flags(self):
        """{name: {"value", "type", "source", "in_key"}} for every flag."""
        return _kiln.config_flags()


config = _Config()


class _Distributed:
    """The processes of one job (docs/DISTRIBUTED.md): kiln.distributed.initialize(
    "redis://127.0.0.1:6379", num_processes=8, process_id=3, job="train-42") before the first
    compile; then one process compiles each program and the others load its result."""

    @_raising_kiln_errors
    def initialize(self, coordinator, num_processes, process_id, job=""):
        _kiln.distributed_initialize(str(coordinator), int(num_processes), int(process_id),
                                     str(job))

    def context(self):
        """{"coordinator", "num_processes", "process_id", "job"}, or None outside a job."""
        return _kiln.distributed_context()


distributed = _Distributed()
