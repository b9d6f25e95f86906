"""Cross-checks tern's file formats against independent implementations: the reference
`safetensors` package (its Rust validator) and numpy, for test_safetensors_python.

    safetensors_interop.py check-tern FILE     validate and check a file tern wrote
    safetensors_interop.py write-ref FILE      write a file with the reference writer
    safetensors_interop.py check-shard FILE    check a token shard tern wrote
    safetensors_interop.py write-shard FILE    write a token shard as llm.c does
Exits 0 when all is well, 1 with a message otherwise."""
import sys

import numpy as np
import safetensors
from safetensors.numpy import save_file


def fail(msg):
    print("interop: " + msg)
    sys.exit(1)


def check_tern(path):
    data = open(path, "rb").read()
    # The reference parser validates the header, offsets and sizes; it raises on any fault.
    tensors = dict(safetensors.deserialize(data))
    with safetensors.safe_open(path, framework="numpy") as f:
        meta = f.metadata()
        numpy_names = set(f.keys())
        a = f.get_tensor("a")
    if meta != {"format": "pt", "origin": "tern"}:
        fail("metadata %r" % (meta,))
    if set(tensors) != {"a", "h", "b", "i", "u"} or numpy_names != set(tensors):
        fail("names %r" % (sorted(tensors),))
    want_a = (np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(2, 3)
    if a.dtype != np.float32 or not np.array_equal(a, want_a):
        fail("a = %r" % (a,))
    def raw(name, dtype, shape):
        t = tensors[name]
        if t["dtype"] != dtype.lower() and t["dtype"] != dtype:
            fail("%s has dtype %s, wanted %s" % (name, t["dtype"], dtype))
        if list(t["shape"]) != shape:
            fail("%s has shape %r" % (name, t["shape"]))
        return bytes(t["data"])
    h = np.frombuffer(raw("h", "F16", [4]), dtype="<f2")
    if not np.array_equal(h, np.array([1, -2, 0.5, 65504], dtype=np.float16)):
        fail("h = %r" % (h,))
    b = (np.frombuffer(raw("b", "BF16", [3]), dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    if not np.array_equal(b, np.array([1, -2, 0.5], dtype=np.float32)):
        fail("b = %r" % (b,))
    i = np.frombuffer(raw("i", "I32", [2, 2]), dtype="<i4")
    if not np.array_equal(i, np.array([-1, 0, 1, 2**31 - 1])):
        fail("i = %r" % (i,))
    u = np.frombuffer(raw("u", "U16", [3]), dtype="<u2")
    if not np.array_equal(u, np.array([0, 50256, 65535])):
        fail("u = %r" % (u,))


def write_ref(path):
    save_file({
        "w": (np.arange(12, dtype=np.float32) / 4 - 1).reshape(3, 4),
        "half": np.array([0.25, -3, 1e-4], dtype=np.float16),
        "ids": np.array([1, 2**40], dtype=np.int64),
        "mask": np.array([[True, False], [True, True]]),
        "bytes": np.array([7, 255], dtype=np.uint8),
        "n": np.array(-5, dtype=np.int32),
    }, path, metadata={"format": "np", "who": "reference"})


def check_shard(path):
    data = np.fromfile(path, dtype=np.uint8)
    header = data[:1024].view("<i4")
    if header[0] != 20240520 or header[1] != 1 or header[2] != 5 or header[3:].any():
        fail("shard header %r" % (header[:4],))
    tokens = data[1024:].view("<u2")
    if not np.array_equal(tokens, np.array([50256, 15496, 11, 995, 0])):
        fail("shard tokens %r" % (tokens,))


def write_shard(path):
    # As llm.c's data_common.write_datafile: a 256-int32 header, then uint16 tokens.
    tokens = np.array([464, 2068, 7586, 21831, 50256, 65535], dtype=np.uint16)
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(header.astype("<i4").tobytes())
        f.write(tokens.astype("<u2").tobytes())


if __name__ == "__main__":
    {"check-tern": check_tern, "write-ref": write_ref, "check-shard": check_shard,
     "write-shard": write_shard}[sys.argv[1]](sys.argv[2])
