#!/usr/bin/env python3
"""Reliability campaign: several hundred bad or edge-case inputs across every
subcommand of the release binary, kills during writes, and a full disk.

Each case runs in a fresh temporary directory with a timeout and a memory cap, and is
classified:

  ok          the expected outcome (bad input: exit 2 naming the flag or file; valid
              input: exit 0, or 3 where a GPU is needed and this machine has none)
  panic       exit 101 or "panicked" in stderr
  abort       killed by a signal (SIGABRT, SIGSEGV, ...)
  hang        ran past the timeout
  leftover    a file in the case directory (also the program's TMPDIR) that was not
              there before (any name, temporaries and dotfiles included), other than
              the expected output
  clobbered   an input file changed
  exit0-bad   exit 0 on a bad input
  exit3-bad   exit 3 ("no GPU") on an invalid input (3 is only for valid inputs)
  unclear     exit 2, but stderr names neither the case's flag nor its file
  unexpected  any other exit code (e.g. 2 on a valid input)
  gpu-stdout  exit 3 with the "no GPU" line on standard output (it belongs on standard
              error, so that --json output stays parseable)
  not-reached a kill case whose signal never landed during a write
  wrong-result  a repaired compile-cache entry reported other registers or SASS than a
              clean cache does, or a mutated packed file loaded as a different mask
  slow        a huge sparse file refused, but not within a second (its body was read)
  skipped     a case this machine cannot run (no NVRTC, no unshare, no Python venv);
              not a finding, listed as SKIPPED

The compile-cache cases (corrupted, special, huge and stale entries; concurrent writers,
also as PID 1 of two PID namespaces; writers killed by SIGINT/SIGTERM/SIGKILL) need
NVRTC. The checksum cases mutate packed files at random and check the CLI and, where
./.cache/pyenv holds the package (scripts/test-python.sh), Python's Mask.load; the same
venv runs Mask.save killed by SIGTERM/SIGHUP/SIGINT.

Usage: scripts/campaign.py [--fragmask target/release/fragmask] [--json report.json]
       [--timeout 60] [--mem-gib 4] [--only SUBCOMMAND] [--jobs 2] [--no-kills]
       [--no-cache-checksums] [-v]
Python 3.11 standard library only. Build first: cargo build --release. The bench sass,
verify --compile-only and demo cases compile CUDA with NVRTC: source
.cache/cuda-toolchain/env.sh (see scripts/install-cuda-toolchain.sh) first.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

TEMP_PREFIX = ".fragmask-tmp-"
BAD_NUMBERS = [
    "-1",
    "abc",
    "",
    "1.5",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "0x10",
    " 5",
]


# --------------------------------------------------------------------------- files


def npy(descr: str, shape: tuple, data: bytes | None = None, fortran=False, version=1) -> bytes:
    """A .npy file (format 1.0 or 2.0); data defaults to zeros of the right size."""
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr,
        "True" if fortran else "False",
        "(" + "".join(f"{d}, " for d in shape).rstrip(" ") + ")"
        if len(shape) != 1
        else f"({shape[0]},)",
    )
    size_len = 2 if version == 1 else 4
    pre = 6 + 2 + size_len
    pad = (64 - (pre + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    if data is None:
        itemsize = int(descr[2:]) if descr[2:].isdigit() else 1
        n = 1
        for d in shape:
            n *= d
        data = bytes(n * itemsize)
    fmt = "<H" if version == 1 else "<I"
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack(fmt, len(header)) + header.encode() + data


def safetensors(tensors: dict, metadata: dict | None = None, raw_header: dict | None = None) -> bytes:
    """tensors: name -> (dtype, shape, bytes)."""
    header = {}
    blob = b""
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if metadata is not None:
        header["__metadata__"] = metadata
    if raw_header is not None:
        header = raw_header
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + blob


def i32(values) -> bytes:
    return b"".join(struct.pack("<i", v) for v in values)


def i64(values) -> bytes:
    return b"".join(struct.pack("<q", v) for v in values)


def f32(values) -> bytes:
    return b"".join(struct.pack("<f", v) for v in values)


def npy_corruptions(valid: bytes, stride: int = 1) -> list[tuple[str, bytes]]:
    """Corruptions of a valid .npy file: truncation at header offsets, header length
    lies, wrong magic/version, bad header text, shapes whose product overflows."""
    out = []
    hlen = struct.unpack("<H", valid[8:10])[0]
    end = 10 + hlen
    for cut in range(0, end + 2, stride):
        out.append((f"truncated-at-{cut}", valid[:cut]))
    out.append(("truncated-data", valid[: end + (len(valid) - end) // 2]))
    out.append(("extra-data", valid + b"\0" * 8))
    for lie in (0, 1, hlen - 1, hlen + 1, 0xFFFF):
        out.append((f"header-len-{lie}", valid[:8] + struct.pack("<H", lie) + valid[10:]))
    out.append(("bad-magic", b"\x93NUMPZ" + valid[6:]))
    out.append(("version-9", valid[:6] + b"\x09\x00" + valid[8:]))
    out.append(("version-2-short", valid[:6] + b"\x02\x00" + valid[8:]))
    header = valid[10:end].decode("latin1")
    for name, new in [
        ("not-a-dict", "[1, 2, 3]"),
        ("unbalanced", "{'descr': '<f4', 'shape': (2,"),
        ("no-descr", "{'fortran_order': False, 'shape': (2, 2), }"),
        ("no-shape", "{'descr': '<f4', 'fortran_order': False, }"),
        ("fortran", header.replace("False", "True")),
        ("descr-object", header.replace(header.split("'descr': '")[1].split("'")[0], "|O")),
        ("descr-string", header.replace(header.split("'descr': '")[1].split("'")[0], "<U8")),
        ("descr-struct", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }"),
        ("descr-bigendian", header.replace("'<", "'>") if "'<" in header else "{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }"),
        ("shape-negative", "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4), }"),
        ("shape-overflow", "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }"),
        ("shape-huge", "{'descr': '<f4', 'fortran_order': False, 'shape': (8192, 8192, 1073741824, 256), }"),
        ("shape-bignum", "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999999,), }"),
        ("shape-float", "{'descr': '<f4', 'fortran_order': False, 'shape': (2.5, 2), }"),
        ("shape-deep", "{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 5000 + ")" * 5000 + ", }"),
        ("rank-40", "{'descr': '<f4', 'fortran_order': False, 'shape': (" + "1, " * 40 + "), }"),
        ("non-ascii", "{'descr': '\u00e9', 'fortran_order': False, 'shape': (2,), }"),
        ("nul", "{'descr': '<f4\0', 'fortran_order': False, 'shape': (2,), }"),
    ]:
        body = new + " " * max(0, hlen - 1 - len(new)) + "\n"
        out.append((f"header-{name}", valid[:8] + struct.pack("<H", len(body)) + body.encode("latin1") + valid[end:]))
    return out


def st_corruptions(valid: bytes, stride: int = 1) -> list[tuple[str, bytes]]:
    """Corruptions of a valid safetensors file."""
    out = []
    n = struct.unpack("<Q", valid[:8])[0]
    header = json.loads(valid[8 : 8 + n])
    for cut in range(0, 8 + n + 2, stride):
        out.append((f"truncated-at-{cut}", valid[:cut]))
    out.append(("truncated-data", valid[: 8 + n + (len(valid) - 8 - n) // 2]))
    for lie in (0, 1, n - 1, n + 1, len(valid), 1 << 40, (1 << 64) - 1):
        out.append((f"header-len-{lie}", struct.pack("<Q", lie) + valid[8:]))
    out.append(("header-not-json", struct.pack("<Q", 8) + b"{{{{{{{{" + valid[8 + n :]))
    out.append(("header-array", struct.pack("<Q", 8) + b"[1,2,3] " + valid[8 + n :]))
    out.append(("header-deep", struct.pack("<Q", 20000) + b"[" * 10000 + b"]" * 10000))
    blob = valid[8 + n :]
    first = next(k for k in header if k != "__metadata__")

    def with_entry(name, change):
        h = json.loads(json.dumps(header))
        change(h[first]) if name != "meta" else change(h)
        text = json.dumps(h).encode()
        return struct.pack("<Q", len(text)) + text + blob

    for name, change in [
        ("offsets-empty", lambda e: e.update(data_offsets=[])),
        ("offsets-one", lambda e: e.update(data_offsets=[0])),
        ("offsets-reversed", lambda e: e.update(data_offsets=[e["data_offsets"][1], e["data_offsets"][0]])),
        ("offsets-past-end", lambda e: e.update(data_offsets=[0, len(blob) + 1000])),
        ("offsets-huge", lambda e: e.update(data_offsets=[0, (1 << 64) - 1])),
        ("offsets-negative", lambda e: e.update(data_offsets=[-8, 0])),
        ("offsets-strings", lambda e: e.update(data_offsets=["0", "4"])),
        ("offsets-short", lambda e: e.update(data_offsets=[0, max(0, e["data_offsets"][1] - e["data_offsets"][0] - 1)])),
        ("dtype-unknown", lambda e: e.update(dtype="Q7")),
        ("dtype-missing", lambda e: e.pop("dtype")),
        ("dtype-float", lambda e: e.update(dtype="F64")),
        ("shape-missing", lambda e: e.pop("shape")),
        ("shape-negative", lambda e: e.update(shape=[-1])),
        ("shape-overflow", lambda e: e.update(shape=[1 << 32, 1 << 32, 1 << 32])),
        ("shape-zero", lambda e: e.update(shape=[0] + e["shape"][1:])),
        ("shape-rank-0", lambda e: e.update(shape=[])),
        ("shape-rank-9", lambda e: e.update(shape=[1] * 8 + [e["shape"][-1]])),
        ("entry-not-object", lambda e: e.clear() or e.update(x=1)),
        ("meta", lambda h: h.update(__metadata__={"a": 1})),
    ]:
        out.append((name, with_entry(name, change)))
    return out


# --------------------------------------------------------------------------- cases


@dataclass
class Case:
    group: str  # subcommand, for the summary
    name: str
    args: list  # strings; "{d}" is replaced by the case directory
    expect: str = "bad"  # bad | valid | edge
    names: list = field(default_factory=list)  # any of these in stderr = message is clear
    files: dict = field(default_factory=dict)  # name -> bytes | "dir" | "fifo" | ("symlink", target)
    outputs: list = field(default_factory=list)  # files allowed to appear on exit 0
    gpu: bool = False  # valid inputs exit 3 here (no GPU)
    fsize: int | None = None  # RLIMIT_FSIZE (full disk)
    timeout: float | None = None


def subst(a: str, d: str) -> str:
    return a.replace("{d}", d)


def numeric_cases(group, base, flag, bad_extra=(), edge=(), names=None, gpu=False, outputs=(), files=None):
    """Cases replacing (or adding) `flag VALUE` in `base`."""
    cases = []
    names = names or [flag]
    for v in list(BAD_NUMBERS) + list(bad_extra):
        cases.append(Case(group, f"{flag}={v!r}", set_flag(base, flag, v), "bad", names, dict(files or {}), list(outputs), gpu))
    for v in edge:
        cases.append(Case(group, f"{flag}={v!r}", set_flag(base, flag, v), "edge", names, dict(files or {}), list(outputs), gpu))
    return cases


def set_flag(base, flag, value):
    args = list(base)
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args += [flag, value]
    return args


def build_cases(root_tmp: str) -> list[Case]:
    C: list[Case] = []
    mask_ok = npy("|b1", (256, 256), bytes([1]) * 65536)
    topk_ok = npy("<i4", (256, 4), i32([(q * 7 + j) % 256 for q in range(256) for j in range(4)]))
    csr_idx = npy("<i4", (256,), i32(range(256)))
    csr_off = npy("<i4", (257,), i32(range(257)))
    blocks_st = safetensors(
        {
            "q2k_block_sparse_index": ("I32", [4, 2], i32([0, 1, 1, 2, 2, 3, 3, 0])),
            "q2k_block_sparse_num": ("I32", [4], i32([2, 2, 1, 2])),
            "variable_block_sizes": ("I32", [4], i32([64, 64, 64, 32])),
        }
    )
    blocks_idx = npy("<i4", (4, 2), i32([0, 1, 1, 2, 2, 3, 3, 0]))
    blocks_num = npy("<i4", (4,), i32([2, 2, 1, 2]))
    blocks_sizes = npy("<i4", (4,), i32([64, 64, 64, 32]))
    doc_ok = npy("<i4", (256,), i32([q // 100 for q in range(256)]))
    q_ok = npy("<f4", (1, 1, 128, 64), f32([0.5] * 128 * 64))
    qkv_st = safetensors({n: ("F32", [1, 1, 128, 64], f32([0.25] * 128 * 64)) for n in "qkv"})
    dense_att = npy("|b1", (1, 1, 128, 128), bytes([1]) * 128 * 128)

    # A valid packed file (for inspect and attention --mask): made by the binary itself.
    packed = Path(root_tmp) / "packed.safetensors"
    packed128 = Path(root_tmp) / "packed128.safetensors"
    for path, sq in [(packed, 256), (packed128, 128)]:
        r = subprocess.run(
            [FRAGMASK, "pack", "--predicate", "causal", "--seqlen-q", str(sq), "--seqlen-k", str(sq), "-q", "-o", str(path)],
            capture_output=True,
        )
        if r.returncode != 0:
            sys.exit(f"cannot make a packed file: {r.stderr.decode()}")
    packed_ok = packed.read_bytes()
    packed128_ok = packed128.read_bytes()

    P = "pack"
    pred = ["pack", "--predicate", "causal", "--seqlen-q", "256", "--seqlen-k", "256", "-q", "-o", "{d}/out.safetensors"]
    out = ["out.safetensors"]
    C.append(Case(P, "valid predicate", pred, "valid", outputs=out))
    C.append(Case(P, "valid mask", ["pack", "--mask", "{d}/m.npy", "-q", "-o", "{d}/out.safetensors"], "valid", files={"m.npy": mask_ok}, outputs=out))
    C.append(Case(P, "valid topk", ["pack", "--topk", "{d}/t.npy", "--seqlen-k", "256", "-q", "-o", "{d}/out.safetensors"], "valid", files={"t.npy": topk_ok}, outputs=out))
    C.append(Case(P, "valid csr", ["pack", "--topk", "{d}/i.npy", "--topk-offsets", "{d}/o.npy", "--seqlen-k", "256", "--seqlen-q", "256", "-q", "-o", "{d}/out.safetensors"], "valid", files={"i.npy": csr_idx, "o.npy": csr_off}, outputs=out))
    C.append(Case(P, "valid blocks st", ["pack", "--blocks", "{d}/b.safetensors", "-q", "-o", "{d}/out.safetensors"], "valid", files={"b.safetensors": blocks_st}, outputs=out))
    C.append(Case(P, "valid blocks npy", ["pack", "--blocks", "{d}/b.npy", "--blocks-num", "{d}/n.npy", "--block-sizes", "{d}/s.npy", "-q", "-o", "{d}/out.safetensors"], "valid", files={"b.npy": blocks_idx, "n.npy": blocks_num, "s.npy": blocks_sizes}, outputs=out))
    C.append(Case(P, "valid doc", ["pack", "--predicate", "causal,doc={d}/doc.npy", "--seqlen-q", "256", "--seqlen-k", "256", "-q", "-o", "{d}/out.safetensors"], "valid", files={"doc.npy": doc_ok}, outputs=out))
    C.append(Case(P, "valid 250-char output", ["pack", "--predicate", "causal", "--seqlen-q", "64", "--seqlen-k", "64", "-q", "-o", "{d}/" + "a" * 250], "valid", outputs=["a" * 250]))
    for flag in ["--seqlen-q", "--seqlen-k"]:
        C += numeric_cases(P, pred, flag, ["4294967296", "18446744073709551615", "3000000000", "1000000000000"], edge=["0", "1", "1000000"], outputs=out)
    C += numeric_cases(P, pred, "--warpgroups", ["0", "4", "4294967295", "4294967296"], edge=["1", "3"], outputs=out)
    C += numeric_cases(P, pred, "--threads", ["100000", "1025", "65536"], edge=["0", "1", "1024"], outputs=out)
    for v in ["0x0", "128", "x", "128x", "x128", "128x128x128", "-128x128", "18446744073709551616x128", "4294967296x128",
              "0x128", "128x0", "127x128", "128x7", "65536x65536", "", "1e3x128"]:
        C.append(Case(P, f"--block={v!r}", set_flag(pred, "--block", v), "bad", ["--block"], outputs=out))
    C.append(Case(P, "--block 128X128", set_flag(pred, "--block", "128X128"), "edge", ["--block"], outputs=out))
    C.append(Case(P, "--encoding bogus", pred + ["--encoding", "bogus"], "bad", ["--encoding"]))
    csr = ["pack", "--topk", "{d}/i.npy", "--topk-offsets", "{d}/o.npy", "--seqlen-k", "10", "-q", "-o", "{d}/out.safetensors"]
    csr_files = {"i.npy": csr_idx, "o.npy": csr_off}
    for flag in ["--batch", "--heads"]:
        C += numeric_cases(P, csr, flag, ["4294967296", "18446744073709551615", "0"], files=csr_files, names=[flag, "i.npy", "o.npy"])
    C.append(Case(P, "csr batch*seqlen-q overflow", csr + ["--batch", "4294967296", "--seqlen-q", "4294967296"], "bad", ["--batch", "--seqlen-q", "o.npy"], csr_files))
    blk = ["pack", "--blocks", "{d}/b.safetensors", "-q", "-o", "{d}/out.safetensors"]
    C += numeric_cases(P, blk, "--sparse-block", ["0", "4294967296", "18446744073709551615"], edge=["1", "128"], files={"b.safetensors": blocks_st}, names=["--sparse-block", "b.safetensors"], outputs=out)
    # Predicates.
    for name, text in [
        ("8000 atoms", ",".join(["causal"] * 8000)),
        ("10000 bangs", "!" * 10000 + "causal"),
        ("50000 parens", "(" * 50000 + "causal" + ")" * 50000),
        ("65 parens", "(" * 65 + "causal" + ")" * 65),
        ("unbalanced", "((causal)"),
        ("empty", ""),
        ("unknown atom", "sideways"),
        ("window bad", "window=abc:1"),
        ("window huge", "window=18446744073709551616:0"),
        ("window neg", "window=-5:0"),
        ("window one", "window=5"),
        ("prefix huge", "prefix=99999999999999999999999"),
        ("doc missing", "doc={d}/nope.npy"),
        ("doc empty", "doc="),
        ("doc dir", "doc={d}"),
        ("doc devzero", "doc=/dev/zero"),
        ("trailing op", "causal|"),
        ("double op", "causal||causal"),
        ("bang only", "!"),
        ("nul byte-ish", "causal\u0001"),
        ("unicode", "cau\u00dfal"),
        ("10000 ors", "|".join(["all"] * 10000)),
    ]:
        nm = ["--predicate", "doc="] if "doc" in name else ["--predicate"]
        # Long flat lists and chains of `!` are legal (no recursion, docs/masks.md).
        exp = "edge" if name in ("8000 atoms", "10000 bangs", "10000 ors") else "bad"
        C.append(Case(P, f"predicate {name}", ["pack", "--predicate", text, "--seqlen-q", "256", "--seqlen-k", "256", "-q", "-o", "{d}/out.safetensors"], exp, nm, outputs=out))
    C.append(Case(P, "predicate 64 parens", ["pack", "--predicate", "(" * 64 + "causal" + ")" * 64, "--seqlen-q", "256", "--seqlen-k", "256", "-q", "-o", "{d}/out.safetensors"], "valid", outputs=out))
    for name, data in [("doc wrong length", npy("<i4", (100,), i32(range(100)))), ("doc float", npy("<f4", (256,))), ("doc rank 3", npy("<i4", (1, 1, 256))), ("doc empty file", b""), ("doc csv", b"1,2,3\n")]:
        C.append(Case(P, name, ["pack", "--predicate", "doc={d}/doc.npy", "--seqlen-q", "256", "--seqlen-k", "256", "-q", "-o", "{d}/out.safetensors"], "bad", ["doc.npy"], {"doc.npy": data}))
    C.append(Case(P, "doc is output", ["pack", "--predicate", "doc={d}/doc.npy", "--seqlen-q", "256", "--seqlen-k", "256", "-q", "-o", "{d}/doc.npy"], "bad", ["doc.npy"], {"doc.npy": doc_ok}))
    C.append(Case(P, "predicate without seqlen", ["pack", "--predicate", "causal", "-o", "{d}/out.safetensors"], "bad", ["--seqlen"]))
    C.append(Case(P, "topk without seqlen-k", ["pack", "--topk", "{d}/t.npy", "-o", "{d}/out.safetensors"], "bad", ["--seqlen-k"], {"t.npy": topk_ok}))
    # Conflicts and unknown flags.
    for name, extra, nm in [
        ("mask+predicate", ["--mask", "{d}/m.npy"], ["--mask", "--predicate"]),
        ("blocks-num with predicate", ["--blocks-num", "{d}/m.npy"], ["--blocks-num"]),
        ("topk-offsets with predicate", ["--topk-offsets", "{d}/m.npy"], ["--topk-offsets"]),
        ("tensor with predicate", ["--tensor", "x"], ["--tensor"]),
        ("sparse-block with predicate", ["--sparse-block", "64"], ["--sparse-block"]),
        ("unknown flag", ["--frobnicate"], ["--frobnicate"]),
        ("twice", ["--seqlen-q", "5"], ["--seqlen-q"]),
    ]:
        C.append(Case(P, name, pred + extra, "bad", nm, {"m.npy": mask_ok}))
    C.append(Case(P, "no output", ["pack", "--predicate", "causal", "--seqlen-q", "8", "--seqlen-k", "8"], "bad", ["--output"]))
    C.append(Case(P, "no input", ["pack", "-o", "{d}/out.safetensors"], "bad", ["--mask", "--predicate"]))
    C.append(Case(P, "mask + blocks-num", ["pack", "--mask", "{d}/m.npy", "--blocks-num", "{d}/m.npy", "-o", "{d}/out.safetensors"], "bad", ["--blocks-num"], {"m.npy": mask_ok}))
    C.append(Case(P, "mask + block-sizes", ["pack", "--mask", "{d}/m.npy", "--block-sizes", "{d}/m.npy", "-o", "{d}/out.safetensors"], "bad", ["--block-sizes"], {"m.npy": mask_ok}))
    # Readers: every file flag with missing / dir / devices / FIFO / empty / wrong kind.
    reader_bases = [
        ("--mask", ["pack", "--mask", "{d}/X", "-q", "-o", "{d}/out.safetensors"], {}),
        ("--topk", ["pack", "--topk", "{d}/X", "--seqlen-k", "256", "-q", "-o", "{d}/out.safetensors"], {}),
        ("--topk-offsets", ["pack", "--topk", "{d}/i.npy", "--topk-offsets", "{d}/X", "--seqlen-k", "256", "-q", "-o", "{d}/out.safetensors"], {"i.npy": csr_idx}),
        ("--blocks", ["pack", "--blocks", "{d}/X", "-q", "-o", "{d}/out.safetensors"], {}),
        ("--blocks-num", ["pack", "--blocks", "{d}/b.npy", "--blocks-num", "{d}/X", "-q", "-o", "{d}/out.safetensors"], {"b.npy": blocks_idx}),
        ("--block-sizes", ["pack", "--blocks", "{d}/b.npy", "--blocks-num", "{d}/n.npy", "--block-sizes", "{d}/X", "-q", "-o", "{d}/out.safetensors"], {"b.npy": blocks_idx, "n.npy": blocks_num}),
        ("doc=", ["pack", "--predicate", "doc={d}/X", "--seqlen-q", "256", "--seqlen-k", "256", "-q", "-o", "{d}/out.safetensors"], {}),
    ]
    C += special_file_cases(P, reader_bases)
    # Corrupted npy / safetensors for the dense mask (every header offset) and others.
    for label, data in npy_corruptions(mask_ok):
        C.append(Case(P, f"--mask npy {label}", ["pack", "--mask", "{d}/m.npy", "-q", "-o", "{d}/out.safetensors"], "bad", ["m.npy"], {"m.npy": data}))
    mask_st = safetensors({"mask": ("BOOL", [256, 256], bytes([1]) * 65536)})
    for label, data in st_corruptions(mask_st, stride=7):
        C.append(Case(P, f"--mask st {label}", ["pack", "--mask", "{d}/m.safetensors", "-q", "-o", "{d}/out.safetensors"], "bad", ["m.safetensors"], {"m.safetensors": data}))
    for label, data in npy_corruptions(topk_ok, stride=9):
        C.append(Case(P, f"--topk npy {label}", ["pack", "--topk", "{d}/t.npy", "--seqlen-k", "256", "-q", "-o", "{d}/out.safetensors"], "bad", ["t.npy"], {"t.npy": data}))
    for label, data in st_corruptions(blocks_st, stride=23):
        C.append(Case(P, f"--blocks st {label}", blk, "bad", ["b.safetensors"], {"b.safetensors": data}))
    # Wrong rank / dtype / values.
    for label, data, flag in [
        ("mask rank 1", npy("|b1", (256,)), "--mask"),
        ("mask rank 5", npy("|b1", (1, 1, 1, 16, 16)), "--mask"),
        ("mask float", npy("<f4", (16, 16)), "--mask"),
        ("mask zero dim", npy("|b1", (0, 16)), "--mask"),
        ("mask text file", b"hello world\n" * 10, "--mask"),
        ("topk float", npy("<f4", (16, 2)), "--topk"),
        ("topk out of range", npy("<i4", (16, 1), i32([999] * 16)), "--topk"),
        ("topk negative", npy("<i4", (16, 1), i32([-7] * 16)), "--topk"),
        ("topk duplicate", npy("<i4", (16, 2), i32([1, 1] * 16)), "--topk"),
        ("topk i64 huge", npy("<i8", (16, 1), i64([1 << 62] * 16)), "--topk"),
        ("topk rank 1", npy("<i4", (16,), i32(range(16))), "--topk"),
    ]:
        args = ["pack", flag, "{d}/x.npy", "-q", "-o", "{d}/out.safetensors"] + (["--seqlen-k", "256"] if flag == "--topk" else [])
        C.append(Case(P, label, args, "bad", ["x.npy"], {"x.npy": data}))
    csr_bad = [
        ("csr offsets 2-D", npy("<i4", (257, 1), i32(range(257)))),
        ("csr offsets short", npy("<i4", (10,), i32(range(10)))),
        ("csr offsets decreasing", npy("<i4", (257,), i32([0] + list(range(256, 0, -1))))),
        ("csr offsets past end", npy("<i4", (257,), i32([0] * 256 + [100000]))),
        ("csr offsets negative", npy("<i4", (257,), i32([-1] * 257))),
    ]
    for label, data in csr_bad:
        C.append(Case(P, label, ["pack", "--topk", "{d}/i.npy", "--topk-offsets", "{d}/o.npy", "--seqlen-k", "256", "-q", "-o", "{d}/out.safetensors"], "bad", ["o.npy", "i.npy", "--topk"], {"i.npy": csr_idx, "o.npy": data}))
    for label, files in [
        ("blocks sizes 2-D", {"b.npy": blocks_idx, "n.npy": blocks_num, "s.npy": npy("<i4", (4, 1), i32([64] * 4))}),
        ("blocks num too big", {"b.npy": blocks_idx, "n.npy": npy("<i4", (4,), i32([9] * 4)), "s.npy": blocks_sizes}),
        ("blocks index out of range", {"b.npy": npy("<i4", (4, 2), i32([0, 99] * 4)), "n.npy": blocks_num, "s.npy": blocks_sizes}),
        ("blocks sizes over block", {"b.npy": blocks_idx, "n.npy": blocks_num, "s.npy": npy("<i4", (4,), i32([65] * 4))}),
        ("blocks sizes negative", {"b.npy": blocks_idx, "n.npy": blocks_num, "s.npy": npy("<i4", (4,), i32([-1] * 4))}),
    ]:
        C.append(Case(P, label, ["pack", "--blocks", "{d}/b.npy", "--blocks-num", "{d}/n.npy", "--block-sizes", "{d}/s.npy", "-q", "-o", "{d}/out.safetensors"], "bad", ["b.npy", "n.npy", "s.npy"], files))
    C.append(Case(P, "--tensor missing name", ["pack", "--mask", "{d}/m.safetensors", "--tensor", "nope", "-q", "-o", "{d}/out.safetensors"], "bad", ["nope", "m.safetensors"], {"m.safetensors": mask_st}))
    C.append(Case(P, "-o equal to --mask", ["pack", "--mask", "{d}/m.npy", "-q", "-o", "{d}/m.npy"], "bad", ["m.npy"], {"m.npy": mask_ok}))
    C += output_cases(P, lambda o: ["pack", "--predicate", "causal", "--seqlen-q", "64", "--seqlen-k", "64", "-q", "-o", o], ["--output", "-o"])

    # ---- inspect
    I = "inspect"
    C.append(Case(I, "valid", ["inspect", "{d}/p.safetensors"], "valid", files={"p.safetensors": packed_ok}))
    C += special_file_cases(I, [("FILE", ["inspect", "{d}/X"], {})])
    for label, data in st_corruptions(packed_ok, stride=29):
        C.append(Case(I, f"packed {label}", ["inspect", "{d}/p.safetensors"], "bad", ["p.safetensors"], {"p.safetensors": data}))
    C.append(Case(I, "npy instead", ["inspect", "{d}/p.safetensors"], "bad", ["p.safetensors"], {"p.safetensors": mask_ok}))
    C.append(Case(I, "dense mask st", ["inspect", "{d}/p.safetensors"], "bad", ["p.safetensors"], {"p.safetensors": mask_st}))
    C += metadata_lies(I, packed_ok)
    C.append(Case(I, "no file", ["inspect"], "bad", ["FILE", "<FILE>"]))
    C.append(Case(I, "two files", ["inspect", "{d}/p.safetensors", "{d}/p.safetensors"], "bad", ["p.safetensors"], {"p.safetensors": packed_ok}))
    C.append(Case(I, "unknown flag", ["inspect", "--json", "{d}/p.safetensors"], "bad", ["--json"], {"p.safetensors": packed_ok}))

    # ---- attention (no GPU here: valid inputs exit 3)
    A = "attention"
    qkv_files = {"q.npy": q_ok, "k.npy": q_ok, "v.npy": q_ok}
    qkv = ["--q", "{d}/q.npy", "--k", "{d}/k.npy", "--v", "{d}/v.npy"]
    for cmd, group in [(["attention"], A), (["bench", "attention"], "bench attention")]:
        C.append(Case(group, "valid random", cmd + ["--random", "1,1,1,128,128,64"], "valid", gpu=True))
        C.append(Case(group, "valid files", cmd + qkv + ["--causal"], "valid", files=qkv_files, gpu=True))
        C.append(Case(group, "valid inputs", cmd + ["--inputs", "{d}/qkv.safetensors"], "valid", files={"qkv.safetensors": qkv_st}, gpu=True))
        C.append(Case(group, "valid packed mask", cmd + ["--random", "1,1,1,128,128,64", "--mask", "{d}/p.safetensors"], "valid", files={"p.safetensors": packed128_ok}, gpu=True))
        C.append(Case(group, "valid dense mask", cmd + ["--random", "1,1,1,128,128,64", "--dense-mask", "{d}/m.npy"], "valid", files={"m.npy": dense_att}, gpu=True))
        for v in ["1,1,1,1073741824,1,256", "1,1,1,128,128", "1,1,1,128,128,64,1", "0,1,1,128,128,64", "1,2,3,128,128,64",
                  "1,1,1,128,128,7", "18446744073709551615,1,1,128,128,64", "1,1,1,4294967296,4294967296,64", "-1,1,1,1,1,64",
                  "a,b", "", ",,,,,", "8192,8192,1,8192,8192,256"]:
            C.append(Case(group, f"--random {v!r}", cmd + ["--random", v], "bad", ["--random"], gpu=True))
        base = cmd + ["--random", "1,1,1,128,128,64"]
        for flag, bad in [("--warmup", ["1000001", "18446744073709551615"]), ("--iters", ["1000001"]), ("--seed", []), ("--stages", ["0", "99", "4294967295"])]:
            C += numeric_cases(group, base, flag, bad, gpu=True)
        for v in ["2147483648", "-2147483649", "abc", "", "1.5"]:
            C.append(Case(group, f"--diag-offset {v!r}", base + ["--diag-offset", v], "bad", ["--diag-offset"], gpu=True))
        C.append(Case(group, "--diag-offset -1", base + ["--diag-offset", "-1"], "valid", gpu=True))
        for v in ["nan", "inf", "-inf", "abc", ""]:
            C.append(Case(group, f"--scale {v!r}", base + ["--scale", v], "bad", ["--scale"], gpu=True))
        for v in ["1", "1,2,3", "-2,0", "a,b", "9223372036854775808,0", "-1,-1,-1", "", "-5,-5"]:
            C.append(Case(group, f"--window {v!r}", base + ["--window", v], "bad", ["--window"], gpu=True))
        for v in ["random:2", "random:-1", "random:nan", "blocksparse:99999999999:0.5", "topk:2", "blocksparse:0.5:1.5", "bogus", "random", "", "blocksparse:64", "topk:nan"]:
            C.append(Case(group, f"--synthetic-mask {v!r}", base + ["--synthetic-mask", v], "bad", ["--synthetic-mask"], gpu=True))
        for v in ["maybe", "1"]:
            C.append(Case(group, f"--pingpong {v}", base + ["--pingpong", v], "bad", ["--pingpong"], gpu=True))
        C.append(Case(group, "causal + window", base + ["--causal", "--window", "1,1"], "bad", ["--window", "--causal"], gpu=True))
        C.append(Case(group, "random + q", base + ["--q", "{d}/q.npy"], "bad", ["--random", "--q"], qkv_files, gpu=True))
        C.append(Case(group, "q without k", cmd + ["--q", "{d}/q.npy"], "bad", ["--k", "--v"], qkv_files, gpu=True))
        C.append(Case(group, "no inputs", list(cmd), "bad", ["--inputs", "--random"], gpu=True))
        C.append(Case(group, "mask + dense-mask", base + ["--mask", "{d}/q.npy", "--dense-mask", "{d}/q.npy"], "bad", ["--mask", "--dense-mask"], qkv_files, gpu=True))
        readers = [
            ("--q", cmd + ["--q", "{d}/X", "--k", "{d}/k.npy", "--v", "{d}/v.npy"], {"k.npy": q_ok, "v.npy": q_ok}),
            ("--v", cmd + ["--q", "{d}/q.npy", "--k", "{d}/k.npy", "--v", "{d}/X"], {"k.npy": q_ok, "q.npy": q_ok}),
            ("--inputs", cmd + ["--inputs", "{d}/X"], {}),
            ("--mask", base + ["--mask", "{d}/X"], {}),
            ("--dense-mask", base + ["--dense-mask", "{d}/X"], {}),
        ]
        C += special_file_cases(group, readers, gpu=True)
        stride = 1 if group == A else 11
        for label, data in npy_corruptions(q_ok, stride=stride):
            C.append(Case(group, f"--q npy {label}", cmd + qkv, "bad", ["q.npy"], {**qkv_files, "q.npy": data}, gpu=True))
        for label, data in st_corruptions(qkv_st, stride=3 * stride):
            C.append(Case(group, f"--inputs st {label}", cmd + ["--inputs", "{d}/qkv.safetensors"], "bad", ["qkv.safetensors"], {"qkv.safetensors": data}, gpu=True))
        for label, data in st_corruptions(packed128_ok, stride=37):
            C.append(Case(group, f"--mask st {label}", base + ["--mask", "{d}/p.safetensors"], "bad", ["p.safetensors"], {"p.safetensors": data}, gpu=True))
        for label, data in npy_corruptions(dense_att, stride=13):
            C.append(Case(group, f"--dense-mask npy {label}", base + ["--dense-mask", "{d}/m.npy"], "bad", ["m.npy"], {"m.npy": data}, gpu=True))
        for label, qd, kd in [
            ("q rank 3", npy("<f4", (1, 128, 64)), q_ok),
            ("q int", npy("<i4", (1, 1, 128, 64)), q_ok),

            ("k other D", q_ok, npy("<f4", (1, 1, 128, 128))),

            ("q D=7", npy("<f4", (1, 1, 128, 7)), npy("<f4", (1, 1, 128, 7))),
            ("q shape huge", npy("<f4", (8192, 8192, 1073741824, 256), b""), q_ok),
            ("q zero seq", npy("<f4", (1, 1, 0, 64)), q_ok),
        ]:
            C.append(Case(group, label, cmd + qkv, "bad", ["q.npy", "k.npy", "--q", "--k"], {"q.npy": qd, "k.npy": kd, "v.npy": kd}, gpu=True))
        for label, qd in [("q f64", npy("<f8", (1, 1, 128, 64))), ("q nan", npy("<f4", (1, 1, 128, 64), f32([float("nan")] * 128 * 64)))]:
            C.append(Case(group, label, cmd + qkv, "edge", ["q.npy", "--q"], {**qkv_files, "q.npy": qd}, gpu=True))
        for v in ["blocksparse:0:0.5", "topk:0", "random:1"]:
            C.append(Case(group, f"--synthetic-mask {v}", base + ["--synthetic-mask", v], "valid", gpu=True))
        C.append(Case(group, "packed mask other shape", cmd + ["--random", "1,1,1,512,512,64", "--mask", "{d}/p.safetensors"], "bad", ["p.safetensors"], {"p.safetensors": packed128_ok}, gpu=True))
        C.append(Case(group, "dense mask other shape", cmd + ["--random", "1,1,1,256,256,64", "--dense-mask", "{d}/m.npy"], "bad", ["m.npy"], {"m.npy": dense_att}, gpu=True))
    C.append(Case(A, "--head-dim 7 --emit-source", ["attention", "--emit-source", "--head-dim", "7"], "bad", ["--head-dim", "head"]))
    C += numeric_cases(A, ["attention", "--emit-source"], "--head-dim", ["0", "4294967296"], names=["--head-dim", "head"])
    C.append(Case(A, "--emit-source valid", ["attention", "--emit-source"], "valid"))
    for label, extra in [("--out dir", ["--out", "{d}/sub"]), ("--out devnull", ["--out", "/dev/null"]), ("--out = --q", ["--out", "{d}/q.npy"]),
                         ("--lse-out fifo", ["--lse-out", "{d}/fifo"]), ("--out missing dir", ["--out", "{d}/nodir/o.npy"]), ("--out link devnull", ["--out", "{d}/null"])]:
        nm = ["--out", "--lse-out"]
        exp = "edge" if "missing dir" in label else "bad"
        C.append(Case(A, label, ["attention"] + qkv + extra, exp, nm, {**qkv_files, "sub": "dir", "fifo": "fifo", "null": ("symlink", "/dev/null")}, gpu=True))

    # ---- lightning / bench lightning
    L = "lightning"
    lbase = ["lightning", "--random", "1,1,1,64", "--steps", "2"]
    C.append(Case(L, "valid", lbase, "valid", gpu=True))
    C.append(Case(L, "valid E", ["lightning", "--random", "1,2,1,64,128", "--steps", "3", "--dtype", "f32"], "valid", gpu=True))
    for v in ["", "1", "1,1,1", "1,1,1,64,64,64", "0,1,1,64", "1,0,1,64", "1,1,0,64", "1,1,1,0", "1,1,1,7", "1,1,1,64,0",
              "18446744073709551615,1,1,64", "4294967296,4294967296,1,64", "1,1,1,18446744073709551616", "a,b,c,d", "-1,1,1,64",
              "1,1,1,100000", "1000000,1000,1,256", "1,1,4294967296,64", ",,,", "1, 1, 1, 64"]:
        C.append(Case(L, f"--random {v!r}", ["lightning", "--random", v, "--steps", "2"], "bad" if v != "1, 1, 1, 64" else "edge", ["--random"], gpu=True))
    C += numeric_cases(L, lbase, "--steps", ["0", "18446744073709551615", "100000000000"], names=["--steps"], gpu=True)
    C += numeric_cases(L, lbase, "--col-vectors", ["0", "3", "4294967295", "4294967296", "1000"], names=["--col-vectors"], gpu=True)
    C += numeric_cases(L, lbase, "--seed", [], names=["--seed"], gpu=True)
    for v in ["f64", "", "BF16x", "int8"]:
        C.append(Case(L, f"--dtype {v!r}", lbase + ["--dtype", v], "bad", ["--dtype"], gpu=True))
    C.append(Case(L, "no --random", ["lightning"], "bad", ["--random"], gpu=True))
    C.append(Case(L, "unknown flag", lbase + ["--json", "x"], "bad", ["--json"], gpu=True))
    BL = "bench lightning"
    bl = ["bench", "lightning"]
    C.append(Case(BL, "valid", bl, "valid", gpu=True))
    C.append(Case(BL, "valid all", bl + ["--col-vectors", "all", "--batch", "1", "--dim", "64"], "valid", gpu=True))
    for v in ["", "a", "1,,2", "-1", "0", "18446744073709551616", "18446744073709551615", "4294967296", "1,1000000000"]:
        C.append(Case(BL, f"--batch {v!r}", bl + ["--batch", v], "bad", ["--batch"], gpu=True))
    for flag, bad in [("--heads", ["0", "18446744073709551615", "4294967296"]), ("--dim", ["0", "7", "100000", "18446744073709551615"]),
                      ("--dim-v", ["0", "7", "100000"]), ("--tokens", ["0", "18446744073709551615"]),
                      ("--iters", ["0", "18446744073709551615"]), ("--warmup", ["18446744073709551615"]), ("--rotate-mb", ["16385", "18446744073709551615"])]:
        C += numeric_cases(BL, bl, flag, bad, names=[flag], gpu=True)
    C.append(Case(BL, "--rotate-mb 0", bl + ["--rotate-mb", "0"], "valid", gpu=True))
    for v in ["", "none", "0", "3", "4294967296", "-1", "1,,2", "18446744073709551616"]:
        C.append(Case(BL, f"--col-vectors {v!r}", bl + ["--col-vectors", v], "bad", ["--col-vectors"], gpu=True))
    for v in ["f64", ""]:
        C.append(Case(BL, f"--dtype {v!r}", bl + ["--dtype", v], "bad", ["--dtype"], gpu=True))
    C += json_output_cases(BL, bl, gpu=True)

    # ---- layout
    Y = "layout"
    for e in ["(4,8):(1,4)", "composition((4,8):(1,4), (2,2):(1,2))", "left_inverse((1,2,4):(4,1,8))", "size((2,3):(1,2))"]:
        C.append(Case(Y, f"valid {e}", ["layout", e], "valid"))
    C.append(Case(Y, "valid --json", ["layout", "(4,8):(1,4)", "--json"], "valid"))
    C.append(Case(Y, "valid 60000 deep", ["layout", "(" * 60000 + "4" + ")" * 60000], "edge", ["expression", "nest", "deep", "depth"]))
    layout_bad = [
        "", "(", ")", "(4,8):(1,", "(4,8):(1,4,2)", "(4,8):(1)", "18446744073709551616", "(18446744073709551615,2):(1,1)",
        "(4294967296,4294967296,4294967296):(1,1,1)", "-4:1", "(0,4):(1,1)", "foo((4,8):(1,4))", "composition((4,8):(1,4))",
        "composition(" * 10000 + "4" + ")" * 10000, "(" * 100000, ")" * 1000, "[4,8]", "4:", ":4", "(4,8):(1,4) garbage",
        "left_inverse((2,2):(1,1))", "coalesce()",
        "complement((4,8):(1,4), 0)", "complement((4,8):(1,4), -1)", "\u00e9", "4" * 10000, "(9223372036854775807,2):(2,1)",
        "((2,2),((3,3),((4,4),((5,5),(6,6))))):(1,2)", "size(" * 100 + "4" + ")" * 100,
        "blocked_product((1099511627776,1099511627776):(1,1099511627776), (1099511627776,1099511627776):(1,1099511627776))",
        "logical_product((65536,65536):(1,65536), (65536,65536):(1,65536))", "composition((2,2):(1,2), (1000000000000,):(1,))",
    ]
    for e in layout_bad:
        C.append(Case(Y, f"expr {e[:40]!r}", ["layout", e], "bad" if e != "" else "bad", ["expression", "layout", "EXPR", "<EXPR>", "error:"]))
    # Defined in CuTe for any layout (not errors): must not fail badly.
    for e in ["right_inverse((4,4):(1,0))", "logical_divide((4,8):(1,4), (3,5):(1,3))"]:
        C.append(Case(Y, f"expr {e}", ["layout", e], "edge", ["expression", "layout", "error:"]))
    C.append(Case(Y, "no expr", ["layout"], "bad", ["EXPR"]))
    C.append(Case(Y, "table + json", ["layout", "4:1", "--table", "--json"], "bad", ["--table", "--json"]))
    C.append(Case(Y, "unknown flag", ["layout", "4:1", "--frob"], "bad", ["--frob"]))
    C.append(Case(Y, "--table huge", ["layout", "--table", "(1000000,1000000):(1,1000000)"], "edge", ["--table", "table"]))

    # ---- frag
    F = "frag"
    C.append(Case(F, "valid", ["frag"], "valid"))
    C.append(Case(F, "valid json", ["frag", "--json", "--thread", "37"], "valid"))
    C.append(Case(F, "valid svg", ["frag", "--svg", "{d}/f.svg"], "valid", outputs=["f.svg"]))
    for flag, bad, edge in [("--block-m", ["0", "7", "4294967296", "4294967295", "65536"], ["64", "192"]),
                            ("--block-n", ["0", "7", "4294967296", "4294967295", "65536", "257"], ["8", "256"]),
                            ("--warpgroups", ["0", "4", "4294967295"], ["1", "3"]),
                            ("--thread", ["256", "4294967295", "4294967296"], ["0", "255"])]:
        C += numeric_cases(F, ["frag"], flag, bad, edge=edge, names=[flag])
    C.append(Case(F, "block-m 192 warpgroups 2", ["frag", "--block-m", "192", "--warpgroups", "2"], "edge", ["--block-m", "--warpgroups"]))
    C += output_cases(F, lambda o: ["frag", "--svg", o], ["--svg"])
    C.append(Case(F, "unknown flag", ["frag", "--thread", "1", "--frob"], "bad", ["--frob"]))

    # ---- codegen
    G = "codegen"
    C.append(Case(G, "valid", ["codegen", "-o", "{d}/a.cuh"], "valid", outputs=["a.cuh"]))
    C.append(Case(G, "valid stdout", ["codegen", "-o", "-"], "valid"))
    C.append(Case(G, "default output", ["codegen"], "valid", outputs=["fragmask_apply.cuh"]))
    for v in ["0x0", "x", "128", "7x128", "128x7", "4294967296x128", "18446744073709551616x128", "65536x65536", "-128x128", "", "128x128x1"]:
        C.append(Case(G, f"--block {v!r}", ["codegen", "--block", v, "-o", "{d}/a.cuh"], "bad", ["--block"]))
    C += numeric_cases(G, ["codegen", "-o", "{d}/a.cuh"], "--warpgroups", ["0", "4", "4294967296", "4294967295"], edge=["1", "3"], outputs=["a.cuh"])
    for v in ["bogus", "", "FRAGMENT-NATIVE"]:
        C.append(Case(G, f"--encoding {v!r}", ["codegen", "--encoding", v, "-o", "{d}/a.cuh"], "bad", ["--encoding"]))
    C += output_cases(G, lambda o: ["codegen", "-o", o], ["--output", "-o"])

    # ---- verify, demo, bench sass / apply / packer
    V = "verify"
    C.append(Case(V, "valid", ["verify", "--sanitizer-friendly"], "valid", gpu=True, timeout=300))
    C += numeric_cases(V, ["verify", "--sanitizer-friendly"], "--seed", [], gpu=True)
    C.append(Case(V, "unknown flag", ["verify", "--frob"], "bad", ["--frob"], gpu=True))
    C.append(Case(V, "value to bool", ["verify", "--compile-only=yes"], "bad", ["--compile-only"], gpu=True))
    C.append(Case("demo", "valid", ["demo"], "valid", gpu=True, timeout=300))
    C.append(Case("demo", "unknown flag", ["demo", "--frob"], "bad", ["--frob"]))
    C.append(Case("demo", "extra arg", ["demo", "x"], "bad", ["'x'", "x"]))
    S = "bench sass"
    C.append(Case(S, "valid json", ["bench", "sass", "--json", "{d}/s.json"], "valid", outputs=["s.json"], timeout=600))
    for v in ["0x0", "x", "7x128", "4294967296x128", "", "65536x65536"]:
        C.append(Case(S, f"--block {v!r}", ["bench", "sass", "--block", v], "bad", ["--block"]))
    C += numeric_cases(S, ["bench", "sass"], "--warpgroups", ["0", "4", "4294967296"])
    C += json_output_cases(S, ["bench", "sass"])
    BA = "bench apply"
    C.append(Case(BA, "valid", ["bench", "apply"], "valid", gpu=True))
    for flag, bad in [("--tiles-per-cta", ["0", "18446744073709551615"]), ("--distinct-tiles", ["0", "18446744073709551615"]), ("--runs", ["0", "18446744073709551615"])]:
        C += numeric_cases(BA, ["bench", "apply"], flag, bad, gpu=True)
    C += json_output_cases(BA, ["bench", "apply"], gpu=True)
    BP = "bench packer"
    C.append(Case(BP, "valid", ["bench", "packer"], "valid", gpu=True))
    C.append(Case(BP, "valid npy", ["bench", "packer", "--npy", "{d}/m.npy"], "valid", files={"m.npy": mask_ok}, gpu=True))
    for flag, bad in [("--seqlen-q", ["0", "18446744073709551615", "4294967296"]), ("--seqlen-k", ["0", "18446744073709551615"]),
                      ("--planes", ["0", "18446744073709551615"]), ("--runs", ["0", "18446744073709551615"])]:
        C += numeric_cases(BP, ["bench", "packer"], flag, bad, gpu=True)
    for v in ["-0.1", "1.5", "nan", "inf", "abc"]:
        C.append(Case(BP, f"--density {v!r}", ["bench", "packer", "--density", v], "bad", ["--density"], gpu=True))
    for v in ["bogus", ""]:
        C.append(Case(BP, f"--pattern {v!r}", ["bench", "packer", "--pattern", v], "bad", ["--pattern"], gpu=True))
    C += special_file_cases(BP, [("--npy", ["bench", "packer", "--npy", "{d}/X"], {})], gpu=True)
    for label, data in npy_corruptions(mask_ok, stride=17) + [("float", npy("<f4", (16, 16))), ("rank 5", npy("|b1", (1, 1, 1, 16, 16)))]:
        C.append(Case(BP, f"--npy {label}", ["bench", "packer", "--npy", "{d}/m.npy"], "bad", ["m.npy"], {"m.npy": data}, gpu=True))
    C += json_output_cases(BP, ["bench", "packer"], gpu=True)
    # ---- decode / bench decode (no GPU here: valid inputs exit 3)
    D = "decode"
    dbase = ["decode", "--random", "1,1,2,1,128,64"]
    C.append(Case(D, "valid random", dbase, "valid", gpu=True))
    C.append(Case(D, "valid named sizes", ["decode", "--random", "b=1,sq=1,h=2,hkv=1,sk=128,d=64"], "valid", gpu=True))
    C.append(Case(D, "valid paged", dbase + ["--page-size", "16", "--shuffle-pages"], "valid", gpu=True))
    C.append(Case(D, "valid topk", dbase + ["--topk", "16"], "valid", gpu=True))
    for v in ["1,65536,1024,4,1,64", "1,65536,256,1,1,64", "", "1,1,1", "0,1,1,1,128,64", "1,1,3,2,128,64", "1,1,1,1,128,7",
              "-1,1,1,1,128,64", "b=1,sq=1", "b=1,b=1,sq=1,h=1,hkv=1,sk=1,d=64", "x=1,sq=1,h=1,hkv=1,sk=1,d=64",
              "18446744073709551616,1,1,1,128,64", "65535,65536,65535,65535,1073741824,256"]:
        C.append(Case(D, f"--random {v!r}", ["decode", "--random", v], "bad", ["--random"], gpu=True))
    for label, args in [
        ("topk 2^30 keys x 65535 requests", ["decode", "--random", "65535,1,1,1,1073741824,128", "--topk", "1073741824"]),
        ("topk 1e8 of 2^30 keys", ["decode", "--random", "1,1,8,8,1073741824,128", "--topk", "100000000"]),
        ("topk 0", dbase + ["--topk", "0"]),
        ("topk above SK", dbase + ["--topk", "129"]),
    ]:
        C.append(Case(D, label, args, "bad", ["--topk"], gpu=True))
    C += numeric_cases(D, dbase, "--splits", ["0", "257"], gpu=True)
    C += numeric_cases(D, dbase, "--page-size", ["0", "3", "2048"], names=["--page-size", "page size"], gpu=True)
    for v in ["0", "-1", "-inf", "nan", "inf", "abc"]:
        C.append(Case(D, f"--scale {v!r}", dbase + ["--scale", v], "bad", ["--scale"], gpu=True))
    for v in ["-1,5", "-1", "1,2,3", "200", "a"]:
        C.append(Case(D, f"--lengths {v!r}", ["decode", "--random", "2,1,2,1,128,64", "--lengths", v], "bad", ["--lengths"], gpu=True))
    dec_in = ["decode", "--inputs", "{d}/in.safetensors", "--out", "{d}/out.safetensors"]
    for extra in [["--head-major"], ["--seqlens-q", "random"], ["--topk", "4"], ["--sweep-only", "mask"], ["--lengths", "full"],
                  ["--dtype", "f16"], ["--seed", "3"], ["--page-size", "16"], ["--graph"]]:
        C.append(Case(D, f"--inputs + {extra[0]} (ignored)", dec_in + extra, "bad", [extra[0]], gpu=True))
    C.append(Case(D, "--random + --check (ignored)", dbase + ["--check"], "bad", ["--check"], gpu=True))
    C.append(Case(D, "--sweep + --splits (ignored)", ["decode", "--sweep", "--splits", "4"], "bad", ["--splits"], gpu=True))
    bf16 = lambda n: bytes(2 * n)
    C.append(Case(D, "block_table [1, 0]", dec_in, "bad", ["block_table"], {"in.safetensors": safetensors({
        "q": ("BF16", [1, 1, 1, 64], bf16(64)), "k_cache": ("BF16", [1, 16, 1, 64], bf16(1024)),
        "v_cache": ("BF16", [1, 16, 1, 64], bf16(1024)), "block_table": ("I32", [1, 0], b"")})}, gpu=True))
    C.append(Case(D, "valid inputs", dec_in, "valid", files={"in.safetensors": safetensors({
        "q": ("BF16", [1, 1, 1, 64], bf16(64)), "k_cache": ("BF16", [1, 16, 1, 64], bf16(1024)),
        "v_cache": ("BF16", [1, 16, 1, 64], bf16(1024))})}, gpu=True))
    dmask = Path(root_tmp) / "decode_mask.safetensors"
    r = subprocess.run([FRAGMASK, "pack", "--predicate", "all", "--seqlen-q", "1", "--seqlen-k", "256", "--block", "64x64", "--warpgroups", "1", "-q", "-o", str(dmask)],
                       capture_output=True)
    if r.returncode != 0:
        sys.exit(f"cannot make a decode mask: {r.stderr.decode()}")
    for sk, expect in [("128", "bad"), ("300", "bad"), ("256", "valid")]:
        C.append(Case(D, f"--mask of 256 keys, SK={sk}", ["decode", "--random", f"1,1,2,1,{sk},64", "--mask", "{d}/m.safetensors"], expect,
                      ["--mask"], {"m.safetensors": dmask.read_bytes()}, gpu=True))
    BD = "bench decode"
    for preset in ["serving", "vsa", "issue11", "writeup002"]:
        C.append(Case(BD, f"valid --preset {preset}", ["bench", "decode", "--preset", preset], "valid", gpu=True))
    C.append(Case(BD, "--preset bogus", ["bench", "decode", "--preset", "bogus"], "bad", ["--preset"], gpu=True))
    for extra in [["--batch", "3"], ["--page-size", "16"], ["--causal"], ["--head-major"]]:
        C.append(Case(BD, f"--preset + {extra[0]} (ignored)", ["bench", "decode", "--preset", "vsa"] + extra, "bad", [extra[0]], gpu=True))
    C.append(Case(BD, "topk above SK", ["bench", "decode", "--seqlen-k", "128", "--topk", "129"], "bad", ["--topk"], gpu=True))

    # ---- flags a mode ignores, sizes before allocation, messages naming the flag
    for mode in ["--emit-source", "--inspect"]:
        for extra, nm in [(["--backward"], "--backward"), (["--splits", "0"], "--splits"), (["--bwd-stages", "0"], "--bwd-stages"),
                          (["--mask", "{d}/missing.st"], "missing.st"), (["--random", "1,1,1,128,128,64"], "--random"),
                          (["--head-dim", "0"], "--head-dim")]:
            C.append(Case(A, f"{mode} + {' '.join(extra)}", ["attention", mode] + extra, "bad", [nm]))
    for v in ["0", "-1"]:
        C.append(Case(A, f"--scale {v}", ["attention", "--random", "1,1,1,128,128,64", "--scale", v], "bad", ["--scale"], gpu=True))
    C.append(Case(A, "--bwd-stages 0", ["attention", "--random", "1,1,1,128,128,128", "--backward", "--bwd-stages", "0"], "bad", ["--bwd-stages"], gpu=True))
    C.append(Case(A, "--head-dim in a run (ignored)", ["attention", "--random", "1,1,1,128,128,64", "--head-dim", "64"], "bad", ["--head-dim"], gpu=True))
    C.append(Case(A, "--iters without --bench (ignored)", ["attention", "--random", "1,1,1,128,128,64", "--iters", "5"], "bad", ["--iters"], gpu=True))
    C.append(Case(A, "valid named --random", ["attention", "--random", "sk=128,d=64,b=1,h=1,hkv=1,sq=128"], "valid", gpu=True))
    lin = ["lightning", "--inputs", "{d}/in.safetensors", "--out", "{d}/out.safetensors"]
    for extra in [["--steps", "0"], ["--dtype", "f64"], ["--seed", "2"]]:
        C.append(Case(L, f"--inputs + {extra[0]} (ignored)", lin + extra, "bad", [extra[0]], gpu=True))
    lfiles = {"q.npy": npy("<f4", (1, 1, 1, 64)), "k.npy": npy("<f4", (1, 1, 1, 64)), "v.npy": npy("<f4", (1, 1, 1, 64)),
              "state.npy": npy("<f4", (1, 1, 64, 64))}
    largs = ["lightning", "--q", "{d}/q.npy", "--k", "{d}/k.npy", "--v", "{d}/v.npy", "--state", "{d}/state.npy", "--slope", "{d}/slope.npy",
             "--out", "{d}/out.safetensors"]
    C.append(Case(L, "negative slope", largs, "bad", ["--slope"], {**lfiles, "slope.npy": npy("<f4", (1,), f32([-0.5]))}, gpu=True))
    C.append(Case(L, "valid slope files", largs, "valid", files={**lfiles, "slope.npy": npy("<f4", (1,), f32([0.5]))}, gpu=True))
    for v in ["4768,64,1,256,256", "512,64,1,256,256"]:
        C.append(Case(L, f"--random {v} --steps 1 (memory)", ["lightning", "--random", v, "--steps", "1"], "bad", ["--random"], gpu=True))
    C.append(Case(BL, "state of 2.8e14 elements", bl + ["--batch", "65535", "--heads", "65535", "--dim", "256", "--dim-v", "256"], "bad",
                  ["--batch"], gpu=True))
    packed_base = ["pack", "--packed", "{d}/p.safetensors", "--transposed", "-q", "-o", "{d}/out.safetensors"]
    for extra in [["--topk-offsets", "{d}/p.safetensors"], ["--blocks-num", "{d}/p.safetensors"], ["--sparse-block", "64"],
                  ["--batch", "1"], ["--block-sizes", "{d}/p.safetensors"]]:
        C.append(Case(P, f"--packed + {extra[0]} (ignored)", packed_base + extra, "bad", [extra[0]], {"p.safetensors": packed_ok}))
    C.append(Case(P, "64x64 infers 1 warpgroup", ["pack", "--predicate", "causal", "--seqlen-q", "128", "--seqlen-k", "128", "--block", "64x64",
                                                    "-q", "-o", "{d}/out.safetensors"], "valid", outputs=out))
    C.append(Case(G, "64x64 infers 1 warpgroup", ["codegen", "--block", "64x64", "-o", "{d}/a.cuh"], "valid", outputs=["a.cuh"]))

    C.append(Case("bench", "no subcommand", ["bench"], "bad", ["subcommand", "Usage"]))
    C.append(Case("bench", "unknown subcommand", ["bench", "frob"], "bad", ["frob"]))
    C.append(Case("(top)", "unknown subcommand", ["frob"], "bad", ["frob"]))
    C.append(Case("(top)", "no subcommand", [], "bad", ["Usage", "subcommand"]))
    return C


def special_file_cases(group, bases, gpu=False):
    """Every reader flag given a missing file, a directory, /dev/zero, a FIFO, an empty
    file, a symlink loop and a name that is too long."""
    out = []
    for flag, args, files in bases:
        for label, target, extra in [
            ("missing", "nope.npy", {}),
            ("directory", "adir", {"adir": "dir"}),
            ("/dev/zero", "/dev/zero", {}),
            ("fifo", "fifo", {"fifo": "fifo"}),
            ("empty", "empty.npy", {"empty.npy": b""}),
            ("symlink loop", "loop", {"loop": ("symlink", "loop")}),
            ("name too long", "n" * 300, {}),
            ("missing dir", "nodir/x.npy", {}),
        ]:
            path = target if target.startswith("/") else "{d}/" + target
            a = [x.replace("{d}/X", path) if "{d}/X" in x else x for x in args]
            names = [target.split("/")[-1], flag] if not target.startswith("/") else [target, flag]
            out.append(Case(group, f"{flag} {label}", a, "bad", names, {**files, **extra}, gpu=gpu))
    return out


def output_cases(group, make, flags):
    """An output flag given a directory, FIFO, /dev/null, a symlink to /dev/null, a
    missing directory, a too-long name, an empty name, a trailing slash and a full disk."""
    out = []
    files = {"sub": "dir", "fifo": "fifo", "null": ("symlink", "/dev/null"), "dangling": ("symlink", "{d}/gone")}
    for label, o, names, expect in [
        ("directory", "{d}/sub", ["sub"], "bad"),
        ("fifo", "{d}/fifo", ["fifo"], "bad"),
        ("/dev/null", "/dev/null", ["/dev/null"], "bad"),
        ("symlink to /dev/null", "{d}/null", ["null"], "bad"),
        ("missing directory", "{d}/nodir/out.x", ["nodir"], "bad"),
        ("256-char name", "{d}/" + "b" * 256, ["b" * 256], "bad"),
        ("empty name", "", [], "bad"),
        ("trailing slash", "{d}/new/", ["new"], "bad"),
        ("dot", "{d}/.", ["."], "bad"),
        ("dangling symlink", "{d}/dangling", ["dangling"], "edge"),
    ]:
        outputs = ["dangling"] if "dangling" in label else []
        out.append(Case(group, f"output {label}", make(o), expect, names + flags, dict(files), outputs))
    out.append(Case(group, "output full disk", make("{d}/full.out"), "bad", ["full.out"], fsize=512))
    return out


def json_output_cases(group, base, gpu=False):
    files = {"sub": "dir", "fifo": "fifo", "null": ("symlink", "/dev/null")}
    out = []
    for label, o, names in [("directory", "{d}/sub", ["sub"]), ("fifo", "{d}/fifo", ["fifo"]), ("/dev/null", "/dev/null", ["/dev/null"]),
                            ("symlink to /dev/null", "{d}/null", ["null"]), ("missing directory", "{d}/nodir/o.json", ["nodir"]),
                            ("256-char name", "{d}/" + "j" * 256, ["j" * 256])]:
        out.append(Case(group, f"--json {label}", base + ["--json", o], "bad", names + ["--json"], dict(files), gpu=gpu))
    if not gpu:  # a writer that runs here: a full disk
        # The first file written may be a temporary in TMPDIR (the case directory).
        out.append(Case(group, "--json full disk", base + ["--json", "{d}/full.json"], "bad", ["full.json", "{d}:"], fsize=64, timeout=600))
    return out


def metadata_lies(group, packed_ok):
    """Packed files whose __metadata__ disagrees with their tensors."""
    n = struct.unpack("<Q", packed_ok[:8])[0]
    header = json.loads(packed_ok[8 : 8 + n])
    blob = packed_ok[8 + n :]
    meta = header.get("__metadata__", {})
    out = []
    for key in list(meta)[:12]:
        for v in ["0", "-1", "18446744073709551616", "99999", "abc", ""]:
            h = json.loads(json.dumps(header))
            h["__metadata__"][key] = v
            if h["__metadata__"] == header["__metadata__"]:
                continue
            text = json.dumps(h).encode()
            data = struct.pack("<Q", len(text)) + text + blob
            out.append(Case(group, f"metadata {key}={v!r}", ["inspect", "{d}/p.safetensors"], "bad", ["p.safetensors"], {"p.safetensors": data}))
    return out


# --------------------------------------------------------------------------- running


def make_files(d: Path, files: dict):
    for name, content in files.items():
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if content == "dir":
            p.mkdir(exist_ok=True)
        elif content == "fifo":
            os.mkfifo(p)
        elif isinstance(content, tuple) and content[0] == "symlink":
            os.symlink(subst(content[1], str(d)), p)
        else:
            p.write_bytes(content)


def snapshot(d: Path) -> dict:
    """path -> (kind, sha256) of everything under d (links not followed)."""
    out = {}
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            p = Path(root) / n
            st = os.lstat(p)
            rel = str(p.relative_to(d))
            if stat.S_ISREG(st.st_mode):
                out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
            elif stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISFIFO(st.st_mode):
                out[rel] = ("fifo", "")
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", "")
            else:
                out[rel] = ("other", "")
    return out


def limits(mem_bytes: int, fsize: int | None):
    def apply():
        # A campaign started under nohup or as a background job inherits SIGHUP / SIGINT
        # ignored, and so would every case: the kill cases would then time out ("hang") or
        # never land ("not-reached"). The cases get the default dispositions a shell gives.
        for sig in (signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        os.setsid()

    return apply


def run_case(case: Case, base_tmp: str, opts) -> dict:
    d = Path(tempfile.mkdtemp(prefix="case-", dir=base_tmp))
    make_files(d, case.files)
    before = snapshot(d)
    args = [subst(a, str(d)) for a in case.args]
    timeout = case.timeout or opts.timeout
    start = time.monotonic()
    so = se = b""
    try:
        p = subprocess.Popen(
            [FRAGMASK] + args,
            cwd=d,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=limits(opts.mem_gib << 30, case.fsize),
            # Temporaries of the program land in the case directory, where a leftover
            # one is seen.
            env={**os.environ, "TMPDIR": str(d)},
        )
        try:
            so, se = p.communicate(timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            so, se = p.communicate()
            rc = None
    except OSError as e:  # e.g. E2BIG: a case the harness cannot run is a harness bug
        sys.exit(f"case {case.group}: {case.name}: {e}")
    secs = time.monotonic() - start
    stderr = se.decode("utf-8", "replace")
    after = snapshot(d)
    outcome = classify(case, rc, stderr.replace(str(d), "{d}"), before, after)
    if outcome == "ok" and rc == 3 and b"no GPU" in so:
        outcome = "gpu-stdout"
    if secs > 5 or outcome != "ok":
        print(f"  {outcome:<10} {secs:6.1f} s  {case.group}: {case.name} (exit {rc})", file=sys.stderr, flush=True)
    shutil.rmtree(d, ignore_errors=True)
    return {
        "group": case.group,
        "name": case.name,
        "args": [a if len(a) <= 200 else a[:200] + f"...({len(a)} chars)" for a in case.args],
        "expect": case.expect,
        "rc": rc,
        "outcome": outcome,
        "seconds": round(secs, 3),
        "stderr": stderr[-600:],
        "stdout": so.decode("utf-8", "replace")[-200:],
        "new_files": sorted(set(after) - set(before)),
    }


def classify(case: Case, rc, stderr: str, before: dict, after: dict) -> str:
    if rc is None:
        return "hang"
    if rc == 101 or "panicked" in stderr:
        return "panic"
    if rc < 0 or rc in (134, 139):
        return "abort"
    allowed = set(case.outputs) if rc == 0 else set()
    new = set(after) - set(before) - allowed
    if new:
        return "leftover"
    for k, v in before.items():
        if after.get(k) != v and k not in allowed:
            return "clobbered"
    valid_codes = {0} | ({3} if case.gpu else set())
    if case.expect == "valid":
        return "ok" if rc in valid_codes else "unexpected"
    if rc == 2:
        if not case.names or any(n in stderr for n in case.names):
            return "ok"
        return "unclear"
    if case.expect == "edge" and rc in valid_codes:
        return "ok"
    if rc == 0:
        return "exit0-bad"
    if rc == 3:
        return "exit3-bad"
    return "unexpected"


# --------------------------------------------------------------------------- compile cache, checksums, signals
# Cases of the compile cache (corrupted, special and huge entries, concurrent writers,
# writers killed mid-write), of packed-mask checksums (random mutations, files older
# than checksums, huge sparse files; the CLI and Python's Mask.load) and of Mask.save
# killed by a signal. Each yields results shaped like kill_cases' (group, name,
# outcome, detail in "stderr").

CACHE_WARNING = "warning: compile cache entry"
PYENV_PYTHON = Path(os.environ.get("FRAGMASK_PYENV") or ".cache/pyenv") / "bin" / "python"


def finding(group, name, outcome, detail="", rc=None, seconds=0.0, args=()) -> dict:
    return {"group": group, "name": name, "args": list(args), "expect": "bad", "rc": rc, "outcome": outcome,
            "seconds": round(seconds, 3), "stderr": detail, "stdout": "", "new_files": []}


def odd_files(d: Path) -> list[str]:
    """Anything in d that is not a regular file, and every temporary."""
    out = []
    for n in sorted(os.listdir(d)):
        st = os.lstat(d / n)
        if n.startswith(TEMP_PREFIX) or n.startswith(".") or not stat.S_ISREG(st.st_mode):
            out.append(n)
    return out


def inspect_once(cache: Path, scratch: Path, opts, extra=(), prefix=()):
    """`attention --inspect` with FRAGMASK_CACHE_DIR=cache: (rc or None on a hang,
    the kernel/register/SASS summary lines, stderr, seconds)."""
    env = {**os.environ, "FRAGMASK_CACHE_DIR": str(cache), "TMPDIR": str(scratch)}
    start = time.monotonic()
    p = subprocess.Popen(list(prefix) + [FRAGMASK, "attention", "--inspect", *extra], cwd=scratch, env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=limits(opts.mem_gib << 30, None))
    try:
        so, se = p.communicate(timeout=opts.timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        so, se = p.communicate()
        rc = None
    summary = [ln for ln in so.decode("utf-8", "replace").splitlines() if ln.startswith(("registers", "SASS:", "AttentionKernel"))]
    return rc, summary, se.decode("utf-8", "replace"), time.monotonic() - start


def cache_entry_damages(entry: Path, foreign: bytes) -> list[tuple[str, Callable[[Path], None]]]:
    good = entry.read_bytes()

    def write(data):
        return lambda p: p.write_bytes(data)

    def flip(at):
        b = bytearray(good)
        b[at] ^= 0x10
        return write(bytes(b))

    def replace(make):
        def damage(p):
            p.unlink()
            make(p)
        return damage

    def sparse(p):
        with open(p, "r+b") as f:
            f.truncate(1 << 30)

    return [
        ("truncated to half", write(good[: len(good) // 2])),
        ("truncated to 100 bytes", write(good[:100])),
        ("empty", write(b"")),
        ("zeroed", write(bytes(len(good)))),
        ("bit flipped in the header", flip(9)),
        ("bit flipped in the middle", flip(len(good) // 2)),
        ("bit flipped in the last byte", flip(len(good) - 1)),
        ("trailing bytes", write(good + b"\0" * 16)),
        ("another key's entry", write(foreign)),
        ("FIFO", replace(os.mkfifo)),
        ("symlink to /dev/zero", replace(lambda p: os.symlink("/dev/zero", p))),
        ("directory", replace(os.mkdir)),
        ("1 GiB sparse", sparse),
    ]


def cache_cases(base_tmp: str, opts) -> list[dict]:
    G = "compile cache"
    root = Path(tempfile.mkdtemp(prefix="cache-", dir=base_tmp))
    scratch = root / "scratch"
    scratch.mkdir()
    clean, other = root / "clean", root / "other"
    clean.mkdir()
    other.mkdir()
    rc, want, se, secs = inspect_once(clean, scratch, opts)
    if rc != 0 or not want:
        shutil.rmtree(root, ignore_errors=True)
        return [finding(G, "clean --inspect", "skipped" if "NVRTC" in se or "nvrtc" in se else "unexpected",
                        f"exit {rc}; source .cache/cuda-toolchain/env.sh first: {se.strip()[-300:]}", rc, secs)]
    entries = sorted(clean.glob("*.cubin"))
    rc2, other_summary, _, _ = inspect_once(other, scratch, opts, ["--head-dim", "64"])
    others = sorted(other.glob("*.cubin"))
    if len(entries) != 1 or rc2 != 0 or len(others) != 1 or other_summary == want:
        shutil.rmtree(root, ignore_errors=True)
        return [finding(G, "clean --inspect", "unexpected", f"entries {os.listdir(clean)}, other {os.listdir(other)} (exit {rc2})")]
    results = []

    def check_after(cache, name, rc, got, se, secs, expect_warning):
        """The run succeeded with the clean run's summary, warned iff expected, and
        left only regular entries that a further run serves without a warning."""
        if rc is None:
            return finding(G, name, "hang", se[-300:], rc, secs)
        if rc == 101 or "panicked" in se:
            return finding(G, name, "panic", se[-300:], rc, secs)
        if rc != 0:
            return finding(G, name, "unexpected", se[-300:], rc, secs)
        if got != want:
            return finding(G, name, "wrong-result", f"summary {got}, clean run {want}", rc, secs)
        if expect_warning and CACHE_WARNING not in se:
            return finding(G, name, "unclear", f"no '{CACHE_WARNING}' line: {se[-300:]}", rc, secs)
        left = odd_files(cache) + sorted(os.listdir(scratch))
        if left:
            return finding(G, name, "leftover", f"left {left}", rc, secs)
        rc3, again, se3, _ = inspect_once(cache, scratch, opts)
        if rc3 != 0 or again != want or CACHE_WARNING in se3:
            return finding(G, name, "wrong-result", f"the next run: exit {rc3}, {again}, {se3[-300:]}", rc3, secs)
        return finding(G, name, "ok", se.strip()[-300:], rc, secs)

    # Damaged entries: each repaired with the clean run's report.
    for label, damage in cache_entry_damages(entries[0], others[0].read_bytes()):
        cache = root / "damaged"
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(clean, cache)
        damage(cache / entries[0].name)
        rc, got, se, secs = inspect_once(cache, scratch, opts)
        results.append(check_after(cache, f"entry {label}", rc, got, se, secs, True))

    # Concurrent writers into one empty cache: plain, then each the PID 1 of its own
    # PID namespace (as in two containers sharing a cache volume).
    unshare = shutil.which("unshare")
    pid1 = None
    if unshare:
        for args in ([unshare, "-pf", "--mount-proc"], [unshare, "-Urpf", "--mount-proc"]):
            if subprocess.run(args + ["true"], capture_output=True).returncode == 0:
                pid1 = args
                break
    for which, (label, prefix) in enumerate([("two writers", ()), ("two PID-1 writers (unshare -pf)", pid1)]):
        if prefix is None:
            results.append(finding(G, label, "skipped", "unshare -pf --mount-proc is not allowed here"))
            continue
        outcome = None
        for round_ in range(3):
            cache = root / f"concurrent{which}-{round_}"
            cache.mkdir()
            with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
                runs = list(ex.map(lambda _: inspect_once(cache, scratch, opts, (), prefix), range(2)))
            bad = [r for r in runs if r[0] != 0 or r[1] != want]
            if bad:
                outcome = finding(G, label, "hang" if bad[0][0] is None else "wrong-result",
                                  f"round {round_}: exit {bad[0][0]}, {bad[0][1]}, {bad[0][2][-300:]}", bad[0][0], bad[0][3])
                break
            outcome = check_after(cache, label, 0, want, "", max(r[3] for r in runs), False)
            if outcome["outcome"] != "ok":
                outcome["stderr"] = f"round {round_}: " + outcome["stderr"]
                break
        results.append(outcome)

    # A stale temporary (as a SIGKILLed writer leaves it) is removed by the next write.
    cache = root / "stale"
    shutil.copytree(clean, cache)
    planted = [f"{TEMP_PREFIX}{4194303}-0123456789abcdef", f"{TEMP_PREFIX}new-fedcba9876543210", f"{TEMP_PREFIX}1-00000000deadbeef"]
    for n in planted:
        (cache / n).write_bytes(b"half an entry")
    rc, got, se, secs = inspect_once(cache, scratch, opts, ["--head-dim", "64"])
    left = [n for n in os.listdir(cache) if n.startswith(TEMP_PREFIX)]
    ok = rc == 0 and got == other_summary and not left
    results.append(finding(G, "stale temporaries removed by the next write", "ok" if ok else "leftover",
                           f"exit {rc}, temporaries left {left}", rc, secs))

    results += cache_kill_cases(root, scratch, want, opts)
    shutil.rmtree(root, ignore_errors=True)
    return results


def cache_kill_cases(root: Path, scratch: Path, want, opts) -> list[dict]:
    """A cache write killed by SIGINT/SIGTERM (the handler removes its temporary) or
    SIGKILL (the next run's write removes it): no temporary after the next run."""
    G = "compile cache (kill)"
    results = []
    env = {**os.environ, "TMPDIR": str(scratch)}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        name = f"{signal.Signals(sig).name} during a cache write"
        outcome, detail, rc = "not-reached", "the write was never caught in 5 tries", None
        for attempt in range(5):
            cache = root / f"kill-{sig}-{attempt}"
            cache.mkdir()
            p = subprocess.Popen([FRAGMASK, "attention", "--inspect"], cwd=scratch, env={**env, "FRAGMASK_CACHE_DIR": str(cache)},
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 preexec_fn=limits(opts.mem_gib << 30, None))
            sent = False
            deadline = time.monotonic() + opts.timeout
            while p.poll() is None and time.monotonic() < deadline:
                if any(n.startswith(TEMP_PREFIX) for n in os.listdir(cache)):
                    p.send_signal(sig)
                    sent = True
                    break
            try:
                _, se = p.communicate(timeout=opts.timeout)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
                outcome, detail = "hang", f"attempt {attempt}"
                break
            if not sent or rc == 0:
                continue  # finished before the signal landed
            after_kill = odd_files(cache)
            if sig != signal.SIGKILL and after_kill:
                outcome, detail = "leftover", f"after {signal.Signals(sig).name}: {after_kill}"
                break
            rc2, got, se2, _ = inspect_once(cache, scratch, opts)
            left = odd_files(cache)
            if rc2 != 0 or got != want:
                outcome, detail = "wrong-result", f"the next run: exit {rc2}, {got}, {se2[-300:]}"
            elif left:
                outcome, detail = "leftover", f"after the kill {after_kill}, after the next run {left}"
            else:
                outcome, detail = "ok", f"attempt {attempt}: exit {rc}, after the kill {after_kill}, after the next run none"
            break
        results.append(finding(G, name, outcome, detail, rc))
    return results


def split_safetensors(data: bytes):
    """(header dict, data bytes) of a safetensors file, or None if it does not parse."""
    try:
        n = struct.unpack("<Q", data[:8])[0]
        return json.loads(data[8 : 8 + n]), data[8 + n :]
    except Exception:
        return None


def tensors_of(data: bytes):
    """name -> (dtype, shape, bytes), and the metadata; None if it does not parse."""
    parsed = split_safetensors(data)
    if parsed is None or not isinstance(parsed[0], dict):
        return None
    header, blob = parsed
    try:
        out = {k: (v["dtype"], v["shape"], blob[v["data_offsets"][0] : v["data_offsets"][1]]) for k, v in header.items() if k != "__metadata__"}
    except Exception:
        return None
    return out, header.get("__metadata__")


def strip_checksums(data: bytes) -> bytes:
    """The file as written before checksums existed: every sha256.* key removed."""
    header, blob = split_safetensors(data)
    header["__metadata__"] = {k: v for k, v in header["__metadata__"].items() if not k.startswith("sha256.")}
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + blob


def run_quick(args, cwd, timeout, mem_gib):
    start = time.monotonic()
    try:
        r = subprocess.run(args, cwd=cwd, capture_output=True, timeout=timeout, preexec_fn=limits(mem_gib << 30, None),
                           env={**os.environ, "TMPDIR": str(cwd)})
        return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace"), time.monotonic() - start
    except subprocess.TimeoutExpired:
        return None, "", "", time.monotonic() - start


PY_LOAD = """
import sys, fragmask
# Mask.load checks the header in Python first; "ext" calls the extension's load alone.
load = fragmask._fragmask.load if sys.argv[2:] == ["ext"] else fragmask.Mask.load
try:
    load(sys.argv[1])
except (ValueError, OSError) as e:
    print("refused:", e)
    sys.exit(2)
print("loaded")
"""


def checksum_cases(base_tmp: str, opts) -> list[dict]:
    G = "inspect (checksum)"
    results = []
    d = Path(tempfile.mkdtemp(prefix="checksum-", dir=base_tmp))
    topk = d / "topk.npy"
    topk.write_bytes(npy("<i4", (512, 4), i32([(q * 37 + j * 101) % 512 for q in range(512) for j in range(4)])))
    python = PYENV_PYTHON.absolute() if PYENV_PYTHON.exists() else None  # not resolved: the link names the venv
    if python and subprocess.run([str(python), "-c", "import fragmask"], capture_output=True).returncode != 0:
        python = None
    if python is None:
        results.append(finding("python load", "Mask.load cases", "skipped", f"{PYENV_PYTHON}: no venv with fragmask (scripts/test-python.sh builds it)"))
    rng = __import__("random").Random(21)
    for label, extra in [("forward lists", []), ("transposed lists", ["--transposed"])]:
        packed = d / "p.safetensors"
        r = subprocess.run([FRAGMASK, "pack", "--topk", str(topk), "--seqlen-k", "512", "--block", "128x128", "-q", *extra, "-o", str(packed)],
                           capture_output=True)
        if r.returncode != 0:
            results.append(finding(G, f"{label}: pack", "unexpected", r.stderr.decode()[-300:], r.returncode))
            continue
        good = packed.read_bytes()
        names = set(tensors_of(good)[0])
        data_at = 8 + struct.unpack("<Q", good[:8])[0]
        rc, want, _, _ = run_quick([FRAGMASK, "inspect", str(packed)], d, opts.timeout, opts.mem_gib)
        if rc != 0 or "verified" not in want:
            results.append(finding(G, f"{label}: clean inspect", "unexpected", want[-300:], rc))
            continue
        # Random mutations: a third in the header, the rest anywhere.
        counts = {"refused": 0, "identical": 0}
        bad = None
        for i in range(150):
            at = rng.randrange(8, data_at) if i % 3 == 0 else rng.randrange(len(good))
            b = bytearray(good)
            b[at] = (b[at] + rng.randrange(1, 256)) % 256
            mutated = d / "m.safetensors"
            mutated.write_bytes(bytes(b))
            rc, so, se, secs = run_quick([FRAGMASK, "inspect", str(mutated)], d, opts.timeout, opts.mem_gib)
            what = f"byte {at} (data from {data_at}) {good[at]:#04x} -> {b[at]:#04x}"
            if rc is None:
                bad = ("hang", what)
            elif rc == 101 or "panicked" in se:
                bad = ("panic", what + ": " + se[-200:])
            elif rc == 0:
                same = tensors_of(bytes(b)) == tensors_of(good)
                if not same:
                    bad = ("wrong-result", what + ": loaded a different mask")
                counts["identical"] += 1
            elif rc == 2:
                if "m.safetensors" not in se:
                    bad = ("unclear", what + ": " + se[-200:])
                elif at >= data_at and not ("SHA-256" in se and any(f"'{n}'" in se for n in names)):
                    bad = ("unclear", what + ": a data byte refused without a checksum error naming a tensor: " + se[-200:])
                counts["refused"] += 1
            else:
                bad = ("unexpected", what + f": exit {rc}: " + se[-200:])
            if bad:
                break
        results.append(finding(G, f"{label}: 150 random mutations", bad[0] if bad else "ok",
                               bad[1] if bad else f"{counts['refused']} refused, {counts['identical']} loaded identically"))
        # Written before checksums existed: loads, and inspect says so.
        old = d / "old.safetensors"
        old.write_bytes(strip_checksums(good))
        rc, so, se, secs = run_quick([FRAGMASK, "inspect", str(old)], d, opts.timeout, opts.mem_gib)
        ok = rc == 0 and "no checksum" in so
        said = [ln for ln in so.splitlines() if ln.startswith("checksum")]
        results.append(finding(G, f"{label}: file without checksums", "ok" if ok else "unexpected", str(said) + se[-300:], rc, secs))
        if python:
            rc, so, se, secs = run_quick([str(python), "-c", PY_LOAD, str(old)], d, opts.timeout, opts.mem_gib)
            results.append(finding("python load", f"{label}: Mask.load of a file without checksums", "ok" if rc == 0 else "unexpected",
                                   (so + se)[-300:], rc, secs))
            b = bytearray(good)
            b[-1] ^= 1
            (d / "m.safetensors").write_bytes(bytes(b))
            rc, so, se, secs = run_quick([str(python), "-c", PY_LOAD, str(d / "m.safetensors")], d, opts.timeout, opts.mem_gib)
            ok = rc == 2 and "SHA-256" in so and "m.safetensors" in so
            results.append(finding("python load", f"{label}: Mask.load of a flipped last byte", "ok" if ok else "unexpected",
                                   (so + se)[-300:], rc, secs))
        # A 5 GiB sparse file: refused by its header, in well under a second.
        # The refusal must come from the header ("out of memory" would mean the body was read).
        for huge_label, head, because in [("valid header", good, "truncated or extended"), ("zero header", b"", "header")]:
            huge = d / "huge.safetensors"
            huge.write_bytes(head)
            with open(huge, "r+b") as f:
                f.truncate(5 << 30)
            runs = [("inspect", [FRAGMASK, "inspect", str(huge)])]
            if python:
                runs += [("python load", [str(python), "-c", PY_LOAD, str(huge)]),
                         ("python load (extension)", [str(python), "-c", PY_LOAD, str(huge), "ext"])]
            for who, args in runs:
                rc, so, se, secs = run_quick(args, d, opts.timeout, opts.mem_gib)
                outcome = "hang" if rc is None else "panic" if rc == 101 else "slow" if secs > 1.0 else "ok" if rc == 2 else "unexpected"
                if outcome == "ok" and ("huge.safetensors" not in so + se or because not in so + se):
                    outcome = "unclear"
                results.append(finding(G if who == "inspect" else "python load", f"{label}: 5 GiB sparse file, {huge_label}, {who}", outcome,
                                       f"{secs:.2f} s: " + (so + se).strip()[-300:], rc, secs))
            huge.unlink()
    results += save_kill_cases(d, python, opts)
    shutil.rmtree(d, ignore_errors=True)
    return results


PY_SAVE = """
import sys, numpy as np, fragmask
rows = int(sys.argv[2])
idx = ((np.arange(rows) % 128) * 128).astype(np.int32).reshape(rows, 1)
mask = fragmask.Mask.from_topk(idx, 16384)
while True:
    mask.save(sys.argv[1] + "/out.safetensors")
    if len(sys.argv) > 3:
        break
"""


def save_kill_cases(base: Path, python, opts) -> list[dict]:
    """Mask.save killed by SIGTERM or SIGHUP: the next save into that directory
    leaves no temporary."""
    G = "python save (kill)"
    if python is None:
        return [finding(G, "Mask.save kills", "skipped", f"{PYENV_PYTHON}: no venv with fragmask")]
    results = []
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        name = f"{signal.Signals(sig).name} during Mask.save"
        d = Path(tempfile.mkdtemp(prefix="save-kill-", dir=base))
        p = subprocess.Popen([str(python), "-c", PY_SAVE, str(d), "65536"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             preexec_fn=limits(opts.mem_gib << 30, None), env={**os.environ, "TMPDIR": str(d)})
        sent = False
        deadline = time.monotonic() + opts.timeout
        while p.poll() is None and time.monotonic() < deadline:
            if any(n.startswith(TEMP_PREFIX) for n in os.listdir(d)):
                p.send_signal(sig)
                sent = True
                break
        try:
            _, se = p.communicate(timeout=opts.timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            results.append(finding(G, name, "hang" if sent else "not-reached", "", None))
            continue
        after_kill = sorted(os.listdir(d))
        r = subprocess.run([str(python), "-c", PY_SAVE, str(d), "1024", "once"], capture_output=True,
                           env={**os.environ, "TMPDIR": str(d)})
        left = sorted(os.listdir(d))
        if not sent:
            outcome = "not-reached"
        elif r.returncode != 0:
            outcome = "unexpected"
        else:
            outcome = "ok" if left == ["out.safetensors"] else "leftover"
        results.append(finding(G, name, outcome, f"exit {rc}; after the kill {after_kill}, after the next save {left}; {r.stderr.decode()[-200:]}", rc))
        shutil.rmtree(d, ignore_errors=True)
    return results


# --------------------------------------------------------------------------- end of compile cache, checksums, signals


# --------------------------------------------------------------------------- kills


def spread_topk(d: Path, rows: int) -> Path:
    """Top-k with one key per query, in a different key tile for each query of a row
    block, so every tile is partial: rows * 2 KiB of output words."""
    p = d / f"topk{rows}.npy"
    p.write_bytes(npy("<i4", (rows, 1), i32(((q % 128) * 128) for q in range(rows))))
    return p


def kill_cases(base_tmp: str, opts) -> list[dict]:
    results = []
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        name = f"{signal.Signals(sig).name} during pack write"
        d = Path(tempfile.mkdtemp(prefix="kill-", dir=base_tmp))
        inputs = Path(tempfile.mkdtemp(prefix="kill-in-", dir=base_tmp))
        outcome, detail, rc = "not-reached", "", None
        for rows in (16384, 65536, 262144):
            topk = spread_topk(inputs, rows)
            out = d / "out.safetensors"
            p = subprocess.Popen(
                [FRAGMASK, "pack", "--topk", str(topk), "--seqlen-k", "16384", "-q", "-o", str(out)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                preexec_fn=limits(opts.mem_gib << 30, None),
            )
            sent = False
            deadline = time.monotonic() + opts.timeout
            while p.poll() is None and time.monotonic() < deadline:
                if any(n.startswith(TEMP_PREFIX) for n in os.listdir(d)):
                    p.send_signal(sig)
                    sent = True
                    break
            try:
                _, se = p.communicate(timeout=opts.timeout)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                outcome, detail = "hang", f"rows {rows}"
                break
            left = sorted(os.listdir(d))
            if not sent or rc != -sig:
                # Finished before the signal: the whole output, nothing else.
                if left not in ([], ["out.safetensors"]):
                    outcome, detail = "leftover", f"rows {rows}: {left}"
                    break
                if out.exists():
                    out.unlink()
                continue
            if sig != signal.SIGKILL:
                outcome = "ok" if left == [] else "leftover"
                detail = f"rows {rows}, left {left}"
            else:
                stale = [n for n in left if n.startswith(TEMP_PREFIX)]
                # A second run into the same directory removes the stale temporary.
                r = subprocess.run(
                    [FRAGMASK, "pack", "--predicate", "causal", "--seqlen-q", "64", "--seqlen-k", "64", "-q", "-o", str(d / "second.safetensors")],
                    capture_output=True,
                    preexec_fn=limits(opts.mem_gib << 30, None),
                )
                left2 = sorted(os.listdir(d))
                ok = r.returncode == 0 and left2 == ["second.safetensors"] and len(stale) == 1
                outcome = "ok" if ok else "leftover"
                detail = f"rows {rows}, after kill {left}, after second run {left2}"
            break
        results.append({"group": "pack (kill)", "name": name, "args": [], "expect": "bad", "rc": rc, "outcome": outcome,
                        "seconds": 0, "stderr": detail, "stdout": "", "new_files": []})
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(inputs, ignore_errors=True)
    return results


# --------------------------------------------------------------------------- first hour
# A newcomer's first hour, checked on the repository itself rather than through the
# binary's flags: CI lints every crate, no CPU-toolchain test passes by skipping under
# CI=true, README's commands are the ones CI runs, README names no internal issue or
# write-up and no dates, and compiled kernels are cached where README says.

FIRST_HOUR_MANIFESTS = ["Cargo.toml", "crates/python/Cargo.toml", "fuzz/Cargo.toml"]
# The user-facing pages (docs/PERF.md is a measurement log, left out).
FIRST_HOUR_PAGES = ["README.md", "crates/python/README.md"]
# A date inside a file name (bench/results/cp-2026-11-27-...json) is a pointer to a record, not
# a date in the text, so the date pattern skips dates joined to a path or name.
INTERNAL_NAMES = [r"write-?ups? ?\d{3}", r"writeup\d{3}", r"\bissue[ -]?#?\d+",
                  r"(?<![\w/.-])20\d\d-\d\d-\d\d(?![\w-])", r"the GPU machine"]
# A SKIPPED line is allowed without a CI check only when what is missing is hardware.
HARDWARE_SKIP = ["GPU", "SM90", "AVX2"]


def first_hour_cases(opts) -> list[dict]:
    import re

    repo = Path(__file__).resolve().parent.parent
    results = []

    def result(name, ok, detail="", outcome=None):
        results.append({"group": "first hour", "name": name, "args": [], "expect": "valid", "rc": 0 if ok else 1,
                        "outcome": outcome or ("ok" if ok else "unexpected"), "seconds": 0, "stderr": detail,
                        "stdout": "", "new_files": []})

    def read(rel):
        p = repo / rel
        return p.read_text(encoding="utf-8") if p.is_file() else ""

    # CI: fmt and clippy of every crate, each with its own lock, committed.
    ci = read(".ci/run").replace("\\\n", " ")
    ci_lines = [" ".join(line.split()) for line in ci.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    for m in FIRST_HOUR_MANIFESTS:
        if m == "Cargo.toml":
            fmt = any(line.startswith("cargo fmt --all") and "--check" in line for line in ci_lines)
            clippy = [line for line in ci_lines if line.startswith("cargo clippy --workspace")]
        else:
            fmt = any(line.startswith(f"cargo fmt --manifest-path {m}") and "--check" in line for line in ci_lines)
            clippy = [line for line in ci_lines if line.startswith(f"cargo clippy --manifest-path {m}")]
        result(f"CI formats {m}", fmt, ".ci/run")
        ok = any("--all-targets" in c and "--locked" in c and "-D warnings" in c for c in clippy)
        result(f"CI lints {m} (--all-targets --locked -D warnings)", ok, "; ".join(clippy) or "no clippy line")
        lock = str(Path(m).parent / "Cargo.lock")
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", lock], cwd=repo, capture_output=True)
        result(f"{lock} is committed (--locked needs it)", tracked.returncode == 0, tracked.stderr.decode()[-300:])
        if shutil.which("cargo"):
            r = subprocess.run(["cargo", "fmt", "--manifest-path", m, "--", "--check"], cwd=repo, capture_output=True)
            result(f"cargo fmt --check of {m}", r.returncode == 0, (r.stdout + r.stderr).decode("utf-8", "replace")[-600:])
        else:
            result(f"cargo fmt --check of {m}", False, "cargo not found", "not-reached")

    # README's first lines are the two commands, and CI runs exactly the second.
    readme = read("README.md")
    block = re.search(r"```sh\n(.*?)```", readme, re.S)
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()] if block else []
    commands = [c for c in commands if c]
    result("README opens with the demo and the test command", commands[:1] == ["cargo run --release -- demo"] and len(commands) == 2,
           f"first block: {commands}")
    test_cmd = commands[1] if len(commands) == 2 else None
    runs = [line for line in ci_lines if not line.startswith(("cargo ", "set ", "cd ", "export ", "step", "}"))
            and "()" not in line]
    result("CI runs exactly README's test command", test_cmd is not None and runs == [test_cmd], f"CI runs {runs}, README says {test_cmd}")
    result("README has an install section with cargo install --path .",
           "## Install and first run" in readme and re.search(r"cargo install (--locked )?--path \.", readme) is not None)

    # No internal issue or write-up numbers and no dates in user-facing pages.
    pages = FIRST_HOUR_PAGES + sorted(str(p.relative_to(repo)) for p in (repo / "docs").glob("*.md") if p.name != "PERF.md")
    for page in pages:
        text = read(page)
        hits = [m.group(0) for pat in INTERNAL_NAMES for m in re.finditer(pat, text, re.I)]
        result(f"{page} names no issue, write-up or date", bool(text) and not hits, f"found {hits[:8]}")

    # No test passes by skipping under CI=true when a CPU tool is missing.
    sources = [p for pat in ("tests/**/*.rs", "crates/*/tests/**/*.rs", "crates/*/src/**/*.rs", "src/**/*.rs", "scripts/*.sh")
               for p in sorted(repo.glob(pat))]
    unguarded = []
    for p in sources:
        lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
        for i, line in enumerate(lines):
            if "SKIPPED" not in line or line.lstrip().startswith(("//", "#")):
                continue
            context = " ".join(lines[max(0, i - 2): i + 1])
            if any(h in context for h in HARDWARE_SKIP):
                continue
            before = " ".join(lines[max(0, i - 15): i])
            if not re.search(r'"CI"|\bCI:-|in_ci\(\)', before):
                unguarded.append(f"{p.relative_to(repo)}:{i + 1}")
    result("every CPU-tool SKIPPED fails under CI=true", not unguarded, f"no CI check before: {unguarded}")
    pyenv = read("scripts/install-pyenv.sh")
    test_sh = read("scripts/test.sh")
    result("the test command installs safetensors (pinned) before the Rust tests",
           re.search(r"safetensors_version=\"\d", pyenv) is not None
           and 0 <= test_sh.find("install-pyenv.sh") < test_sh.find("cargo test")
           and "FRAGMASK_TEST_PYTHON" in test_sh)

    # Compiled kernels land where README says (one NVRTC compile per location).
    for env_name, readme_name, sub in [(None, "~/.cache/fragmask/nvrtc", ".cache/fragmask/nvrtc"),
                                       ("XDG_CACHE_HOME", "$XDG_CACHE_HOME/fragmask/nvrtc", "xdg/fragmask/nvrtc"),
                                       ("FRAGMASK_CACHE_DIR", "$FRAGMASK_CACHE_DIR", "explicit")]:
        name = f"compiled kernels are cached in {readme_name}, as README says"
        if readme_name not in readme:
            result(name, False, "README does not name it")
            continue
        home = Path(tempfile.mkdtemp(prefix="first-hour-"))
        env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "FRAGMASK_CACHE_DIR")}
        env["HOME"] = str(home)
        if env_name == "XDG_CACHE_HOME":
            env[env_name] = str(home / "xdg")
        elif env_name:
            env[env_name] = str(home / "explicit")
        try:
            r = subprocess.run([FRAGMASK, "attention", "--inspect"], env=env, capture_output=True,
                               timeout=opts.timeout, preexec_fn=limits(opts.mem_gib << 30, None))
            made = sorted(str(f.relative_to(home)) for f in home.rglob("*") if f.is_file())
            if r.returncode != 0:
                result(name, False, r.stderr.decode("utf-8", "replace")[-300:] + " (NVRTC: source .cache/cuda-toolchain/env.sh)",
                       "not-reached")
            else:
                result(name, bool(made) and all(f.startswith(sub + "/") for f in made), f"files: {made[:6]}")
        except subprocess.TimeoutExpired:
            result(name, False, "attention --inspect ran past the timeout", "hang")
        finally:
            shutil.rmtree(home, ignore_errors=True)
    return results


# --------------------------------------------------------------------------- main

FRAGMASK = "target/release/fragmask"


def main():
    global FRAGMASK
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fragmask", default="target/release/fragmask")
    ap.add_argument("--json", help="write the full report here")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case (past it: hang)")
    ap.add_argument("--mem-gib", type=int, default=4, help="RLIMIT_AS per case, GiB")
    ap.add_argument("--only", help="run only this group (e.g. 'pack', 'bench packer')")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-kills", action="store_true")
    ap.add_argument("--no-cache-checksums", action="store_true", help="skip the compile-cache, checksum and Mask.save signal cases")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every non-ok case in full")
    opts = ap.parse_args()
    FRAGMASK = str(Path(opts.fragmask).resolve())
    if not os.access(FRAGMASK, os.X_OK):
        sys.exit(f"{FRAGMASK}: not found; run cargo build --release first")
    base_tmp = tempfile.mkdtemp(prefix="fragmask-campaign-")
    try:
        cases = build_cases(base_tmp)
        if opts.only:
            cases = [c for c in cases if c.group == opts.only]
        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=opts.jobs) as ex:
            results = list(ex.map(lambda c: run_case(c, base_tmp, opts), cases))
        # Compile cache, checksums and signals: groups of their own (see their section).
        for groups_run, runner in [
            (("compile cache", "compile cache (kill)"), cache_cases),
            (("inspect (checksum)", "python load", "python save (kill)"), checksum_cases),
        ]:
            if opts.no_cache_checksums or (opts.only and opts.only not in groups_run):
                continue
            extra = runner(base_tmp, opts)
            results += [r for r in extra if not opts.only or r["group"] == opts.only]

        if not opts.no_kills and (not opts.only or opts.only == "pack (kill)"):
            results += kill_cases(base_tmp, opts)
        if not opts.only or opts.only == "first hour":
            results += first_hour_cases(opts)
        elapsed = time.monotonic() - start
    finally:
        shutil.rmtree(base_tmp, ignore_errors=True)

    classes = ["ok", "panic", "abort", "hang", "leftover", "clobbered", "exit0-bad", "exit3-bad", "unclear", "unexpected", "gpu-stdout",
               "not-reached", "wrong-result", "slow", "skipped"]
    groups = sorted({r["group"] for r in results}, key=lambda g: [r["group"] for r in results].index(g))
    table = {g: {c: 0 for c in classes} for g in groups}
    codes = {g: {} for g in groups}
    for r in results:
        table[r["group"]][r["outcome"]] += 1
        codes[r["group"]][str(r["rc"])] = codes[r["group"]].get(str(r["rc"]), 0) + 1
    shown = [c for c in classes if c == "ok" or any(table[g][c] for g in groups)]
    print(f"{'subcommand':<18} {'cases':>5} " + " ".join(f"{c:>10}" for c in shown) + "   exit codes")
    for g in groups:
        n = sum(table[g].values())
        ec = ", ".join(f"{k}:{v}" for k, v in sorted(codes[g].items()))
        print(f"{g:<18} {n:>5} " + " ".join(f"{table[g][c]:>10}" for c in shown) + f"   {ec}")
    tot = {c: sum(table[g][c] for g in groups) for c in classes}
    print(f"{'total':<18} {len(results):>5} " + " ".join(f"{tot[c]:>10}" for c in shown))
    bad = [r for r in results if r["outcome"] not in ("ok", "skipped")]
    for r in results:
        if r["outcome"] == "skipped":
            print(f"SKIPPED: {r['group']}: {r['name']}: {r['stderr']}")
    print(f"\n{len(results)} cases in {elapsed:.0f} s; {len(bad)} findings.")
    for r in bad:
        line = f"[{r['outcome']}] {r['group']}: {r['name']} (exit {r['rc']})"
        if opts.verbose:
            line += f"\n    args: {r['args']}\n    stderr: {r['stderr'].strip()[-400:]}\n    new files: {r['new_files']}"
        print(line)
    if opts.json:
        Path(opts.json).write_text(json.dumps({"elapsed_s": elapsed, "summary": table, "exit_codes": codes, "results": results}, indent=1))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
