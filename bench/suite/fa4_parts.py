"""Re-split FlashAttention-4's downloaded wheels (shared/peers/fa4/fetch.sh's part1 + part2)
into N folders small enough to ride beside the working tree in one device call each
(the carry's 64 MiB covers the tree too). The big CUTLASS DSL wheel is cut into N byte
ranges; every other wheel goes to the folder with the most room. On the GPU machine run
`bash bench/suite/fa4_install.sh FOLDER` for each folder in consecutive calls.

    python3 bench/suite/fa4_parts.py .carry/fa4 .carry/fa4x 3
"""
import shutil
import sys
from pathlib import Path


def split(src: Path, dst: Path, n: int) -> list[tuple[Path, int]]:
    """Writes `dst/p1` .. `dst/pN` and returns each folder with its size in bytes."""
    if n < 1:
        raise ValueError(f"parts must be at least 1, got {n}")
    wheels = sorted(p for part in ("part1", "part2") for p in (src / part).glob("*.whl"))
    big_parts = sorted(p for part in ("part1", "part2") for p in (src / part).glob("cu13.part.*"))
    name = (src / "part2" / "cu13.name").read_text().strip()
    blob = b"".join(p.read_bytes() for p in big_parts)
    folders = [dst / f"p{i + 1}" for i in range(n)]
    size = [0] * n
    step = -(-len(blob) // n)
    for i, folder in enumerate(folders):
        folder.mkdir(parents=True, exist_ok=True)
        chunk = blob[i * step:(i + 1) * step]
        (folder / f"cu13.chunk.{i:02d}").write_bytes(chunk)
        (folder / "cu13.name").write_text(f"{name}\n{n}\n")
        size[i] = len(chunk)
    for w in sorted(wheels, key=lambda p: -p.stat().st_size):
        i = size.index(min(size))
        shutil.copy2(w, folders[i])
        size[i] += w.stat().st_size
    return list(zip(folders, size))


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit("usage: fa4_parts.py SRC DST PARTS")
    for folder, size in split(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])):
        print(f"{folder}: {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
