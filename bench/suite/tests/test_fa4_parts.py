"""CPU test of bench/suite/fa4_parts.py: the chunks join back into the big wheel byte for
byte, every other wheel lands in exactly one folder, and the folders stay balanced."""
import os
import sys
import tempfile
import unittest
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import fa4_parts  # noqa: E402


class SplitRejoins(unittest.TestCase):
    def test_chunks_rejoin_and_every_wheel_lands_once(self):
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = Path(tmp, "fa4"), Path(tmp, "out")
            big = bytes(range(256)) * 4099  # odd length: the last chunk is shorter
            (src / "part1").mkdir(parents=True)
            (src / "part2").mkdir()
            (src / "part1" / "cu13.part.aa").write_bytes(big[:600_000])
            (src / "part2" / "cu13.part.ab").write_bytes(big[600_000:])
            (src / "part2" / "cu13.name").write_text("libs_cu13-4.8.1.whl\n")
            wheels = {"a.whl": 70_000, "b.whl": 5_000, "c.whl": 300_000}
            for i, (name, size) in enumerate(wheels.items()):
                (src / f"part{1 + i % 2}" / name).write_bytes(b"w" * size)
            sizes = fa4_parts.split(src, dst, 3)
            chunks = sorted(dst.glob("p*/cu13.chunk.*"), key=lambda p: p.name)
            self.assertEqual(len(chunks), 3)
            self.assertEqual(b"".join(p.read_bytes() for p in chunks), big)
            for folder in dst.iterdir():
                self.assertEqual((folder / "cu13.name").read_text().split(), ["libs_cu13-4.8.1.whl", "3"])
            for name, size in wheels.items():
                placed = list(dst.glob(f"p*/{name}"))
                self.assertEqual(len(placed), 1, name)
                self.assertEqual(placed[0].stat().st_size, size)
            total = sum(s for _, s in sizes)
            self.assertEqual(total, len(big) + sum(wheels.values()))
            self.assertLessEqual(max(s for _, s in sizes), total / 3 + 300_000)

    def test_zero_parts_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(ValueError):
                fa4_parts.split(Path(tmp), Path(tmp, "out"), 0)


if __name__ == "__main__":
    unittest.main()
