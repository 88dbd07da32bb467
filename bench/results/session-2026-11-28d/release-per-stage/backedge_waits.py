"""Back-edges of the GEMM loops (a backward branch whose range holds an HGMMA) of a kernel's
SASS that wait on the read scoreboard of an mbarrier arrive (`SYNCS.ARRIVE`), from `cuobjdump -sass` output: the control bits of each
instruction (Volta+ layout: bits 41-61 of the high word: stall 4, yield 1, write barrier 3,
read barrier 3, wait mask 6). Prints, per file and function, each such branch and the arrive.

    python3 backedge_waits.py [--op REGEX] DIR/*.sass

--op: the waited-on instruction's pattern (default `SYNCS.ARRIVE`; `.` for any).
"""
import re
import sys


def instructions(path):
    lines = open(path, errors="replace").read().splitlines()
    fn, i = None, 0
    while i < len(lines):
        f = re.search(r"Function : (\S+)", lines[i])
        if f:
            fn = f.group(1)
        m = re.match(r"\s*/\*([0-9a-f]{4,5})\*/\s+(.*?)\s*;\s*/\* 0x([0-9a-f]{16}) \*/", lines[i])
        if m and i + 1 < len(lines):
            hi = re.search(r"/\* 0x([0-9a-f]{16}) \*/", lines[i + 1])
            if hi:
                ctrl = int(hi.group(1), 16) >> 41
                yield fn, int(m.group(1), 16), m.group(2), (ctrl >> 8) & 7, (ctrl >> 11) & 0x3f
                i += 2
                continue
        i += 1


def main(args):
    op = "SYNCS.ARRIVE"
    if args[:1] == ["--op"]:
        op, args = args[1], args[2:]
    paths = args
    found = 0
    for path in paths:
        ins = list(instructions(path))
        hgmma = [(fn, pc) for fn, pc, text, _, _ in ins if text.startswith("HGMMA")]
        last_read = {}   # read-scoreboard index -> (pc, text) of the last instruction that set it
        for fn, pc, text, rb, wait in ins:
            m = re.search(r"BRA (?:\S+, )?0x([0-9a-f]+)", text)
            if m and int(m.group(1), 16) < pc and any(
                    f == fn and int(m.group(1), 16) <= a < pc for f, a in hgmma):
                for sb in range(6):
                    src = last_read.get((fn, sb))
                    if wait >> sb & 1 and src and re.search(op, src[1]):
                        found += 1
                        print(f"{path.split('/')[-1]} {fn} {pc:05x} {text} waits on {src[0]:05x} {src[1]}")
            if rb != 7:
                last_read[(fn, rb)] = (pc, text)
    print(f"{found} back-edges wait on the operand read of /{op}/")


if __name__ == "__main__":
    main(sys.argv[1:])
