"""A PEP 517 build backend for `pip install .`: builds the Python package with the repository's
CMake build (build/, configured if absent) and packs the extension, libkiln and the compiler and
importer libraries it loads into one wheel. No build dependency is downloaded."""
import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import sysconfig
import zipfile

NAME = "kiln"
VERSION = "0.4.0"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIBRARIES = ("libkiln.so", "libkiln_compiler.so", "libkiln_onnx_import.so")


def _build():
    build = os.path.join(ROOT, "build")
    if not os.path.exists(os.path.join(build, "build.ninja")):
        subprocess.run(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja",
                        "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], check=True, stdout=sys.stderr)
    subprocess.run(["ninja", "-C", build, "-j2", "kiln_python", "kiln_compiler",
                    "kiln_onnx_import"], check=True, stdout=sys.stderr)
    return build


def _tag():
    version = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{version}-{version}-{platform}"


def _package_files(build):
    """(name in the wheel, path) of everything the package needs next to each other."""
    files = [(f"{NAME}/__init__.py", os.path.join(ROOT, "python", NAME, "__init__.py"))]
    extension_dir = os.path.join(build, "python", NAME)
    for name in sorted(os.listdir(extension_dir)):
        if name.startswith("_kiln") and name.endswith(".so"):
            files.append((f"{NAME}/{name}", os.path.join(extension_dir, name)))
    for name in LIBRARIES:
        files.append((f"{NAME}/{name}", os.path.join(build, "lib", name)))
    return files


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    build = _build()
    tag = _tag()
    dist_info = f"{NAME}-{VERSION}.dist-info"
    wheel_name = f"{NAME}-{VERSION}-{tag}.whl"
    metadata = (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
                "Summary: Compile ML tensor programs (MLIR, ONNX) once, run them from the cache\n"
                "Requires-Python: >=3.11\n").encode()
    wheel = (f"Wheel-Version: 1.0\nGenerator: kiln_build\nRoot-Is-Purelib: false\nTag: {tag}\n"
             ).encode()
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w",
                         zipfile.ZIP_DEFLATED) as archive:
        for name, path in _package_files(build):
            with open(path, "rb") as f:
                data = f.read()
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
            records.append(_record_line(name, data))
        for name, data in ((f"{dist_info}/METADATA", metadata), (f"{dist_info}/WHEEL", wheel)):
            archive.writestr(name, data)
            records.append(_record_line(name, data))
        record = io.StringIO()
        csv.writer(record, lineterminator="\n").writerows(records + [[f"{dist_info}/RECORD", "", ""]])
        archive.writestr(f"{dist_info}/RECORD", record.getvalue())
    return wheel_name
