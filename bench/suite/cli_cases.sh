# Sourced by the suite's device scripts: `fm_cli_cases BIN DIR` fills the array `cases` with
# "name|arguments" rows of small fragmask CLI calls, one or more per kernel family and schedule
# (sanitize.sh runs them under compute-sanitizer, layouts.sh compares their outputs across
# --out-layout). DIR (created) receives the packed documents mask the cases read.
fm_cli_cases() {
  local bin=$1 dir=$2
  mkdir -p "$dir"
  # Document ids 0..4 (90, 130, 40, 200, 52 tokens) as a little-endian int32 .npy (format 1.0), written
  # without numpy so the case list also builds where numpy is missing (tests/cli_cases.rs).
  python3 -c "
import struct, sys
ids = [d for d, n in enumerate([90, 130, 40, 200, 52]) for _ in range(n)]
head = \"{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }\" % len(ids)
head += ' ' * (-(10 + len(head) + 1) % 64) + '\\n'
open(sys.argv[1], 'wb').write(b'\\x93NUMPY\\x01\\x00' + struct.pack('<H', len(head)) + head.encode() + struct.pack('<%di' % len(ids), *ids))
" "$dir/doc_ids.npy"
  "$bin" pack --predicate "causal,doc=$dir/doc_ids.npy" --seqlen-q 512 --seqlen-k 512 --transposed -o "$dir/docs.safetensors" -q
  "$bin" pack --predicate "window=300:0" --seqlen-q 1000 --seqlen-k 1000 --block 64x64 -o "$dir/win64.safetensors" -q
  local fwd="attention --random 1,2,2,512,512,128"
  cases=(
    "fwd-causal|$fwd --causal"
    "fwd-window|$fwd --window 128,0"
    "fwd-docs|$fwd --mask $dir/docs.safetensors"
    "fwd-random50|$fwd --synthetic-mask random:0.5"
    "fwd-gqa-blocksparse|attention --random 1,4,2,512,512,128 --synthetic-mask blocksparse:0.3:0.5"
    "fwd-d256-blocksparse|attention --random 1,2,2,512,512,256 --synthetic-mask blocksparse:0.3:0.5"
    "fwd-d64-causal|attention --random 1,2,2,512,512,64 --causal"
    "fwd-d64-tail|attention --random 1,3,3,1000,1100,64 --tail 3,2"
    "fwd-tail-random50|attention --random 1,2,2,700,900,128 --synthetic-mask random:0.5 --tail 2,3"
    "fwd-docs-tail|$fwd --mask $dir/docs.safetensors --tail 2,2"
    "fwd-64tok-tail|attention --random 1,2,2,1000,1000,128 --mask $dir/win64.safetensors --tail 4,2"
    "fwd-window-persistent|$fwd --window 128,0 --persistent on --persistent-ctas 2"
    "fwd-docs-persistent|$fwd --mask $dir/docs.safetensors --persistent on --persistent-ctas 3"
    "fwd-64tok-persistent|$fwd --block 64x64 --synthetic-mask random:0.5 --persistent on --persistent-ctas 3"
    "fwd-64tok-shared-kv|attention --random 1,4,2,900,700,128 --block 64x64/2x2 --synthetic-mask random:0.3"
    "fwd-64tok-shared-kv-sparse|attention --random 2,2,2,2000,2400,128 --block 64x64/2x2 --synthetic-mask random:0.15"
    "fwd-causal-sections|attention --random 2,6,3,400,400,128 --causal --head-section 5"
    "fwd-causal-sections-persistent|attention --random 2,6,3,500,500,128 --causal --head-section 5 --persistent on --persistent-ctas 3"
    "fwd-splitkv|attention --random 1,2,2,64,2048,128 --synthetic-mask random:0.5 --splits 4"
    "bwd-causal|$fwd --backward --causal"
    "bwd-window|attention --random 1,2,2,1100,1100,128 --backward --window 300,0"
    "bwd-window-d64|attention --random 1,2,2,450,500,64 --backward --window 100,40 --diag-offset 30"
    "bwd-docs|$fwd --backward --mask $dir/docs.safetensors"
    "bwd-random50|$fwd --backward --synthetic-mask random:0.5"
    "bwd-gqa-causal-sections|attention --random 2,8,2,1024,1024,128 --backward --causal --head-section 4"
    "bwd-64tok-writer|attention --random 1,2,2,1000,1000,128 --block 64x64 --backward --synthetic-mask random:0.5"
    "bwd-64tok-unpaired|attention --random 1,2,2,1000,1000,128 --block 64x64 --backward --synthetic-mask random:0.5 --paired-keys off"
    "bwd-64tok-paired-d64|attention --random 2,2,2,450,500,64 --block 64x64 --backward --synthetic-mask random:0.5 --paired-keys on"
    # 5 key blocks: one pair has a single member, whose partner warpgroup skips every step (the dS
    # barrier reached from both branches; synccheck, bench/results/session-2026-11-29a/).
    "bwd-64tok-paired-odd|attention --random 1,2,2,256,320,128 --block 64x64 --backward --synthetic-mask random:0.5 --paired-keys on"
    "bwd-128x64|attention --random 1,2,2,300,260,128 --block 128x64 --backward --synthetic-mask random:0.5"
    "bwd-d64-causal|attention --random 1,2,2,512,512,64 --backward --causal"
    "bwd-d256-causal|attention --random 1,2,2,512,512,256 --backward --causal"
    "decode-paged|decode --random b=2,sq=1,h=8,hkv=2,sk=1000,d=128 --page-size 16"
    "decode-causal|decode --random b=2,sq=4,h=8,hkv=2,sk=700,d=128 --causal"
    "lightning|lightning --random b=2,h=8,n=1,d=96 --steps 3"
    "packer|verify --sanitizer-friendly --packer-only"
  )
}
