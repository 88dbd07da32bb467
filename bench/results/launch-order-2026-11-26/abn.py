"""Interleaved N-way timing of fragmask CLI variants: for each row, every variant once per
round, the order reversed every other round; prints per-variant medians over rounds and the
ratio to the first variant. Usage: python3 abn.py PLAN.json BUDGET_S"""
import json, subprocess, sys, time, statistics
plan = json.load(open(sys.argv[1]))
budget = float(sys.argv[2])
t0 = time.time()
rounds = plan["rounds"]
out = {}
for row in plan["rows"]:
    name, args, variants = row["name"], row["args"], row["variants"]
    res = {v[0]: [] for v in variants}
    for r in range(rounds):
        order = variants if r % 2 == 0 else variants[::-1]
        for vname, binary, flags in order:
            if time.time() - t0 > budget:
                break
            cmd = [binary, "bench", "attention", "--random"] + args.split() + ["--json", "--warmup", "5", "--iters", "20"] + flags.split()
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
                ms = json.loads(p.stdout.strip().splitlines()[-1])["ms_median"] if p.returncode == 0 else None
                if ms is None:
                    print("FAIL", name, vname, (p.stderr or p.stdout)[-300:], flush=True)
            except Exception as e:
                ms = None
                print("FAIL", name, vname, e, flush=True)
            if ms is not None:
                res[vname].append(ms)
    base = statistics.median(res[variants[0][0]]) if res[variants[0][0]] else None
    print(f"== {name}  ({args})", flush=True)
    for vname, _, flags in variants:
        xs = res[vname]
        if not xs:
            print(f"   {vname:28s} no result"); continue
        m = statistics.median(xs)
        print(f"   {vname:28s} {m:8.4f} ms  x{(m / base if base else float('nan')):.4f}  rounds {' '.join(f'{x:.4f}' for x in xs)}", flush=True)
    out[name] = res
json.dump(out, open(plan.get("out", "/tmp/abn.json"), "w"), indent=1)
print(f"elapsed {time.time() - t0:.0f} s")
