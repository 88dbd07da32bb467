"""CPU test of bench/suite/fa4_parts.py: the parts join back into one tar.xz that holds every
wheel's files (the big wheel's joined from its pieces) as unzipping each wheel would lay them
out, and the parts are balanced."""
import io
import os
import sys
import tarfile
import tempfile
import unittest
import zipfile
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import fa4_parts  # noqa: E402


def wheel(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


class PartsRejoin(unittest.TestCase):
    def test_parts_rejoin_into_every_wheels_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = Path(tmp, "fa4"), Path(tmp, "out")
            (src / "part1").mkdir(parents=True)
            (src / "part2").mkdir()
            big_files = {"pkg/_mlir/lib.so": os.urandom(50_000) + bytes(200_000), "pkg/runtime.so": b"r" * 3_000}
            big = wheel(big_files)
            (src / "part1" / "cu13.part.aa").write_bytes(big[: len(big) // 2])
            (src / "part2" / "cu13.part.ab").write_bytes(big[len(big) // 2:])
            (src / "part2" / "cu13.name").write_text("libs_cu13-4.8.1.whl\n")
            small = {"a.whl": {"a/__init__.py": b"A = 1\n"}, "b.whl": {"b/x.py": b"x" * 70_000, "b/y/z.txt": b"z"}}
            for i, (name, files) in enumerate(small.items()):
                (src / f"part{1 + i % 2}" / name).write_bytes(wheel(files))
            sizes = fa4_parts.split(src, dst, 2, preset=1)
            parts = sorted(dst.glob("p*/fa4site.tar.xz.*"), key=lambda p: p.name)
            self.assertEqual([p.parent.name for p in parts], ["p1", "p2"])
            for folder in dst.iterdir():
                self.assertEqual((folder / "fa4site.count").read_text().split(), ["2"])
            blob = b"".join(p.read_bytes() for p in parts)
            with tarfile.open(fileobj=io.BytesIO(blob), mode="r:xz") as tar:
                got = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
            want = dict(big_files)
            for files in small.values():
                want.update(files)
            self.assertEqual(got, want)
            self.assertEqual(sum(s for _, s in sizes), len(blob))
            self.assertLessEqual(max(s for _, s in sizes) - min(s for _, s in sizes), 1)

    def test_zero_parts_and_no_wheels_are_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(ValueError):
                fa4_parts.split(Path(tmp), Path(tmp, "out"), 0)
            with self.assertRaises(ValueError):
                fa4_parts.split(Path(tmp), Path(tmp, "out"), 2)


if __name__ == "__main__":
    unittest.main()
