"""Repack FlashAttention-4's downloaded wheels (shared/peers/fa4/fetch.sh's part1 + part2, or
an earlier output of this script's chunk format) into N folders that each ride beside the
working tree in one device call (the carry's 64 MiB covers the tree too).

Every wheel is unpacked into one site tree, which is written as one xz-compressed tar
(about 80 MiB at preset 9, against 108 MiB of wheels: the CUTLASS DSL's MLIR library
compresses far better with xz than with the wheels' deflate) and cut into N byte ranges,
`pI/fa4site.tar.xz.NN` with `pI/fa4site.count`. Two folders fit; fewer calls that must run
back to back (the machine goes back after 30 idle seconds) means fewer lost installs.
On the GPU machine run `bash bench/suite/fa4_install.sh FOLDER` for each folder in
consecutive calls.

    python3 bench/suite/fa4_parts.py /tmp/fa4dl .carry/fa4xz 2
"""
import io
import sys
import tarfile
import zipfile
from pathlib import Path

# The big wheel's pieces: fetch.sh names them cu13.part.*, this script's first format cu13.chunk.*.
PIECES = ("cu13.part.*", "cu13.chunk.*")


def wheels_of(src: Path) -> list[tuple[str, bytes]]:
    """(name, bytes) of every wheel under `src`: the *.whl files, and the big wheel joined from
    its pieces (sorted by file name) under the name in cu13.name."""
    out = [(p.name, p.read_bytes()) for p in sorted(src.rglob("*.whl"))]
    pieces = sorted((p for g in PIECES for p in src.rglob(g)), key=lambda p: p.name)
    if pieces:
        names = sorted(src.rglob("cu13.name"))
        if not names:
            raise ValueError(f"{src}: big-wheel pieces without a cu13.name")
        name = names[0].read_text().split()[0]
        out.append((name, b"".join(p.read_bytes() for p in pieces)))
    if not out:
        raise ValueError(f"{src}: no wheels")
    return out


def site_archive(wheels: list[tuple[str, bytes]], preset: int = 9) -> bytes:
    """One tar.xz of every wheel's files, as `python3 -m zipfile -e WHEEL SITE` lays them out."""
    buf = io.BytesIO()
    seen = set()
    with tarfile.open(fileobj=buf, mode="w:xz", preset=preset) as tar:
        for name, data in wheels:
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                for info in z.infolist():
                    if info.is_dir() or info.filename in seen:
                        continue
                    seen.add(info.filename)
                    member = tarfile.TarInfo(info.filename)
                    member.size = info.file_size
                    member.mode = 0o644
                    tar.addfile(member, z.open(info))
    return buf.getvalue()


def split(src: Path, dst: Path, n: int, preset: int = 9) -> list[tuple[Path, int]]:
    """Writes `dst/p1` .. `dst/pN` and returns each folder with its size in bytes."""
    if n < 1:
        raise ValueError(f"parts must be at least 1, got {n}")
    blob = site_archive(wheels_of(src), preset)
    step = -(-len(blob) // n)
    out = []
    for i in range(n):
        folder = dst / f"p{i + 1}"
        folder.mkdir(parents=True, exist_ok=True)
        chunk = blob[i * step:(i + 1) * step]
        (folder / f"fa4site.tar.xz.{i:02d}").write_bytes(chunk)
        (folder / "fa4site.count").write_text(f"{n}\n")
        out.append((folder, len(chunk)))
    return out


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit("usage: fa4_parts.py SRC DST PARTS")
    for folder, size in split(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])):
        print(f"{folder}: {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
