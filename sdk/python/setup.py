"""Build step of the taskwire package: generates the gRPC modules from the protos.

`build_py` runs `grpc_tools.protoc` (the pinned grpcio-tools of pyproject.toml's
build requirements) over `taskwire/v1/*.proto`, writing `taskwire/v1/*_pb2.py`,
`*_pb2.pyi` and `*_pb2_grpc.py` into the built package (into `src/` for an editable
install). Nothing generated is committed.

The protos are looked up in `proto/` beside this file (an sdist, where `sdist` copies
them), then in the repository's `../../proto` (a build from the source tree).
"""

from __future__ import annotations

import glob
import os
import shutil
from typing import List

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.errors import SetupError

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_PACKAGE = os.path.join("taskwire", "v1")
PROTO_ROOTS = [
    os.path.join(HERE, "proto"),  # an sdist
    os.path.normpath(os.path.join(HERE, "..", "..", "proto")),  # the source tree
]


def _protos(root: str) -> List[str]:
    return sorted(glob.glob(os.path.join(root, PROTO_PACKAGE, "*.proto")))


def proto_root() -> str:
    """The directory the protos are imported from (`-I`)."""
    for root in PROTO_ROOTS:
        if _protos(root):
            return root
    raise SetupError(
        "taskwire: no protos found: looked for taskwire/v1/*.proto in "
        + " and ".join(PROTO_ROOTS)
        + ". Build from the repository's sdk/python (next to its proto/) or from an "
        "sdist made by `python -m build --sdist sdk/python`."
    )


def generate(out_dir: str) -> List[str]:
    """Runs protoc into `out_dir`; returns the files written."""
    import grpc_tools
    from grpc_tools import protoc

    root = proto_root()
    protos = _protos(root)
    # The well-known types (google/protobuf/*.proto) ship with grpcio-tools.
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    os.makedirs(os.path.join(out_dir, PROTO_PACKAGE), exist_ok=True)
    args = [
        "grpc_tools.protoc",
        "-I" + root,
        "-I" + well_known,
        "--python_out=" + out_dir,
        "--grpc_python_out=" + out_dir,
        "--pyi_out=" + out_dir,
    ] + protos
    if protoc.main(args) != 0:
        raise SetupError("taskwire: protoc failed on " + " ".join(protos))
    written = []
    for proto in protos:
        stem = os.path.splitext(os.path.basename(proto))[0]
        for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py"):
            path = os.path.join(out_dir, PROTO_PACKAGE, stem + suffix)
            if os.path.exists(path):
                written.append(path)
    return written


class BuildPyWithProtos(build_py):
    """`build_py`, then the generated modules into the built package."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            # An editable install imports from src/ (the files are ignored by git).
            out_dir = os.path.join(HERE, "src")
        else:
            out_dir = self.build_lib
        self._generated = generate(out_dir)

    def get_outputs(self, include_bytecode: bool = True) -> List[str]:
        return list(super().get_outputs(include_bytecode)) + list(
            getattr(self, "_generated", [])
        )


class SdistWithProtos(sdist):
    """`sdist`, with the protos copied into it (`proto/`), so that it builds alone."""

    def make_release_tree(self, base_dir: str, files: List[str]) -> None:
        super().make_release_tree(base_dir, files)
        root = proto_root()
        for proto in _protos(root):
            dest = os.path.join(base_dir, "proto", PROTO_PACKAGE)
            os.makedirs(dest, exist_ok=True)
            shutil.copy2(proto, dest)


setup(cmdclass={"build_py": BuildPyWithProtos, "sdist": SdistWithProtos})
