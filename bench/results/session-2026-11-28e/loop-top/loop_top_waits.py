"""Waits at the top of a kernel's GEMM step loops that reach back over the back-edge: for
each backward branch whose range holds an HGMMA, the instructions from the loop's start to its
first mbarrier wait (`SYNCS.PHASECHK`), with each scoreboard they wait on and the last
instruction of the previous iteration that set it (cuobjdump -sass control bits, Volta+ layout:
write barrier bits 46-48, read barrier 49-51, wait mask 52-57 of the high word).

    python3 loop_top_waits.py FILE.sass [FUNCTION]
"""
import re
import sys


def instructions(path, function):
    lines = open(path, errors="replace").read().splitlines()
    fn, out = None, []
    for i, line in enumerate(lines):
        f = re.search(r"Function : (\S+)", line)
        if f:
            fn = f.group(1)
        m = re.match(r"\s*/\*([0-9a-f]{4,5})\*/\s+(.*?)\s*;\s*/\* 0x[0-9a-f]{16} \*/", line)
        if m and fn == function and i + 1 < len(lines):
            hi = re.search(r"/\* 0x([0-9a-f]{16}) \*/", lines[i + 1])
            if hi:
                ctrl = int(hi.group(1), 16) >> 41
                out.append((int(m.group(1), 16), m.group(2), (ctrl >> 5) & 7, (ctrl >> 8) & 7,
                            (ctrl >> 11) & 0x3F))
    return out


def main(path, function="fragmask_attention_bwd"):
    ins = instructions(path, function)
    index = {pc: k for k, (pc, *_rest) in enumerate(ins)}
    for k, (pc, text, _wb, _rb, _w) in enumerate(ins):
        m = re.search(r"BRA (?:\S+, )?0x([0-9a-f]+)", text)
        if not m or int(m.group(1), 16) >= pc or int(m.group(1), 16) not in index:
            continue
        top = index[int(m.group(1), 16)]
        body = ins[top:k + 1]
        if not any(t.startswith("HGMMA") for _, t, *_ in body):
            continue
        print(f"loop {ins[top][0]:05x}-{pc:05x}")
        for pc2, text2, _wb2, _rb2, wait in body:
            if "PHASECHK" in text2:
                break
            for sb in range(6):
                if wait >> sb & 1:
                    src = next(((p, t) for p, t, wb, rb, _ in reversed(body) if sb in (wb, rb)), None)
                    kind = "?" if src is None else ("read" if any(
                        rb == sb for p, t, wb, rb, _ in body if p == src[0]) else "write")
                    print(f"  {pc2:05x} {text2[:60]:60s} waits on sb{sb}: {kind} of "
                          f"{src[0]:05x} {src[1][:60]}" if src else f"  {pc2:05x} {text2[:60]} sb{sb}: none")


if __name__ == "__main__":
    main(*sys.argv[1:])
