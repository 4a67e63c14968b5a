#!/usr/bin/env python3
"""Regenerate p4runtime.fds.bin: the P4Runtime schema as a FileDescriptorSet.

The schema is taken from the serialized descriptors embedded in the PyPI packages
`p4runtime` and `googleapis-common-protos` (never from copied .proto text). To move to a
new P4Runtime version, install it in the venv and rerun:

    PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python .venv/bin/python p4runtime-proto/gen-fds.py

p4runtime 1.6.0's generated modules import only with the pure-Python protobuf runtime,
hence the environment variable (set below as well, before protobuf is imported).
"""

import os
import sys

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

from google.protobuf import descriptor_pb2  # noqa: E402
from google.rpc import code_pb2  # noqa: E402
from p4.v1 import p4runtime_pb2  # noqa: E402


def walk(fd, seen, out):
    # Dependencies first: a FileDescriptorSet consumer (prost-build) wants them ordered.
    for dep in fd.dependencies:
        walk(dep, seen, out)
    if fd.name not in seen:
        seen.add(fd.name)
        proto = descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(proto)
        out.file.append(proto)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    target = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "p4runtime.fds.bin")
    fds = descriptor_pb2.FileDescriptorSet()
    seen = set()
    walk(p4runtime_pb2.DESCRIPTOR, seen, fds)
    # google.rpc.Code names the canonical status codes; not a dependency of p4runtime.proto,
    # but clients want the enum.
    walk(code_pb2.DESCRIPTOR, seen, fds)
    data = fds.SerializeToString(deterministic=True)
    with open(target, "wb") as f:
        f.write(data)
    names = ", ".join(f.name for f in fds.file)
    print(f"wrote {target}: {len(data)} bytes, {len(fds.file)} files: {names}")


if __name__ == "__main__":
    main()
