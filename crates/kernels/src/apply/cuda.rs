//! Printing an [`ApplyProgram`] as CUDA C++ device functions.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use fragmask_masks::Encoding;

use super::program::{ApplyProgram, Space};
use crate::emit::{Expr, Let};

/// Helpers the apply functions use, guarded so that several generated headers can share
/// one translation unit. Header-free: no include directives.
pub const APPLY_PRELUDE: &str = concat!(
    r#"#ifndef FRAGMASK_APPLY_PRELUDE
#define FRAGMASK_APPLY_PRELUDE
// -inf as a float: the value a masked score becomes.
__device__ __forceinline__ float fm_apply_neg_inf() { return __int_as_float(0xff800000u); }
"#,
    crate::family::ptx::smem_u32_text!("fm_apply_smem_u32"),
    "#endif // FRAGMASK_APPLY_PRELUDE\n"
);

/// The identifier of an encoding in function and macro names (`fragment_native`, ...).
pub fn ident(encoding: Encoding) -> &'static str {
    match encoding {
        Encoding::FragmentNative => "fragment_native",
        Encoding::QuadLane => "quad_lane",
        Encoding::RowMajor => "row_major",
    }
}

/// Names of the three device functions of an encoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionNames {
    /// `fragmask_<enc>_load(words, base, thread)`: the loads only.
    pub load: String,
    /// `fragmask_<enc>_apply_loaded(acc, words, thread)`: the bit tests only.
    pub apply_loaded: String,
    /// `fragmask_<enc>_apply(acc, base, thread)`: both.
    pub apply: String,
    /// `fragmask_<enc>_load_tile(words, all_words, tile, thread)` (global encodings):
    /// the loads of partial tile `tile`, the thread's offset added first so that a loop
    /// over tiles keeps it in a register.
    pub load_tile: String,
    /// `fragmask_<enc>_apply_tile(acc, all_words, tile, thread)` (global encodings).
    pub apply_tile: String,
}

/// The function names for `encoding`.
pub fn function_names(encoding: Encoding) -> FunctionNames {
    let id = ident(encoding);
    FunctionNames {
        load: format!("fragmask_{id}_load"),
        apply_loaded: format!("fragmask_{id}_apply_loaded"),
        apply: format!("fragmask_{id}_apply"),
        load_tile: format!("fragmask_{id}_load_tile"),
        apply_tile: format!("fragmask_{id}_apply_tile"),
    }
}

/// Indices of the lets `exprs` reference (directly or through other lets), ascending.
fn used_lets<'a>(lets: &[Let], exprs: impl IntoIterator<Item = &'a Expr>) -> BTreeSet<usize> {
    fn walk(e: &Expr, lets: &[Let], out: &mut BTreeSet<usize>) {
        match e {
            Expr::Let(i) => {
                if *i < lets.len() && out.insert(*i) {
                    walk(&lets[*i].expr, lets, out);
                }
            }
            Expr::Bin(_, a, b) => {
                walk(a, lets, out);
                walk(b, lets, out);
            }
            Expr::Thread | Expr::Lit(_) => {}
        }
    }
    let mut out = BTreeSet::new();
    for e in exprs {
        walk(e, lets, &mut out);
    }
    out
}

fn write_lets(s: &mut String, lets: &[Let], used: &BTreeSet<usize>) {
    for &i in used {
        let l = &lets[i];
        let _ = writeln!(
            s,
            "    const unsigned {} = {}; // {}",
            l.name,
            l.expr.cuda(lets),
            l.comment
        );
    }
}

/// The body of a load function. `tile_stride`: `None` reads `tile_words` / `smem_tile`;
/// `Some(words_per_tile)` reads `all_words + offset + tile * words_per_tile`.
fn write_load_body(s: &mut String, program: &ApplyProgram, tile_stride: Option<usize>) {
    let lets = program.lets();
    let used = used_lets(lets, program.fetches().iter().map(|f| &f.offset));
    write_lets(s, lets, &used);
    for (k, fetch) in program.fetches().iter().enumerate() {
        let base = program.fetch_base(k);
        let _ = writeln!(
            s,
            "    const unsigned off{k} = {}; // {}",
            fetch.offset.cuda(lets),
            fetch.comment
        );
        let mut i = 0;
        while i < fetch.words {
            let v = fetch.vector;
            let regs: Vec<String> = (0..v).map(|j| format!("%{j}")).collect();
            let outs: Vec<String> = (0..v)
                .map(|j| format!("\"=r\"(words[{}])", base + i + j))
                .collect();
            let vec = if v == 1 {
                String::new()
            } else {
                format!(".v{v}")
            };
            let dst = if v == 1 {
                regs[0].clone()
            } else {
                format!("{{{}}}", regs.join(", "))
            };
            let addr = if i == 0 {
                format!("off{k}")
            } else {
                format!("off{k} + {i}u")
            };
            match (fetch.space, tile_stride) {
                (Space::Global, None) => {
                    let _ = writeln!(
                        s,
                        "    asm(\"ld.global.nc{vec}.u32 {dst}, [%{v}];\" : {} : \"l\"(tile_words + {addr}));",
                        outs.join(", ")
                    );
                }
                (Space::Global, Some(stride)) => {
                    let _ = writeln!(
                        s,
                        "    asm(\"ld.global.nc{vec}.u32 {dst}, [%{v}];\" : {} : \"l\"(all_words + ({addr}) + (unsigned long long)tile * {stride}u));",
                        outs.join(", ")
                    );
                }
                (Space::Shared, _) => {
                    let _ = writeln!(
                        s,
                        "    asm volatile(\"ld.shared{vec}.u32 {dst}, [%{v}];\" : {} : \"r\"(smem_tile + ({addr}) * 4u) : \"memory\");",
                        outs.join(", ")
                    );
                }
            }
            i += v;
        }
    }
}

/// The `base` parameter of the load function: a global pointer or a shared address.
fn base_param(space: Space) -> &'static str {
    match space {
        Space::Global => "const unsigned* __restrict__ tile_words",
        Space::Shared => "unsigned smem_tile",
    }
}

fn base_arg(space: Space) -> &'static str {
    match space {
        Space::Global => "tile_words",
        Space::Shared => "smem_tile",
    }
}

/// Prints the three device functions of `program` (without the prelude).
///
/// - `load(unsigned (&words)[N], base, unsigned thread)`: `base` is
///   `const unsigned* tile_words` (the tile's first word in global memory, FragmentNative)
///   or `unsigned smem_tile` (the 32-bit shared address of the staged tile's first
///   word, QuadLane and RowMajor); `thread` is the thread's index among the MMA
///   threads, `0 .. 128 × warpgroups`.
/// - `apply_loaded(float* acc, const unsigned (&words)[N], unsigned thread)`: `acc` is
///   the thread's accumulator fragment in value order (CuTe's `tSrS` registers); a
///   value whose mask bit is 0 becomes -inf.
/// - `apply(float* acc, base, unsigned thread)`: both.
pub fn emit_functions(program: &ApplyProgram) -> String {
    let acc = program.accumulator();
    let encoding = program.encoding();
    let names = function_names(encoding);
    let space = program.space();
    let n = program.loaded_words();
    let lets = program.lets();
    let mut s = String::with_capacity(16 * 1024);
    let _ = writeln!(
        s,
        "// ---- fragmask apply: {name}, {bm}x{bn} tile, {w} MMA warpgroup(s){swap}: {threads} threads x {v} values ----\n\
         // Tile words: {wpt} u32 {shape:?}. Each thread loads {n} word(s) in {loads} {space} load(s).\n\
         // {thread_mode}\n\
         // {value_mode}",
        name = encoding.name(),
        bm = acc.block_m(),
        bn = acc.block_n(),
        w = acc.warpgroups(),
        swap = if acc.swap_ab() { ", SwapAB" } else { "" },
        threads = acc.threads(),
        v = acc.values_per_thread(),
        wpt = program.words_per_tile(),
        shape = encoding.word_shape(acc).dims(),
        loads = program.loads_per_thread(),
        space = space.name(),
        thread_mode = program.terms().thread_comment(),
        value_mode = program.terms().value_comment(),
    );

    // ---- load ----
    let _ = writeln!(
        s,
        "__device__ __forceinline__ void {}(unsigned (&words)[{n}], {}, unsigned thread)\n{{",
        names.load,
        base_param(space)
    );
    write_load_body(&mut s, program, None);
    s.push_str("    (void)thread;\n}\n\n");
    if space == Space::Global {
        let _ = writeln!(
            s,
            "// Partial tile `tile` of `all_words` ([tiles][{wpt}] u32): the same loads, the thread's offset\n\
             // added before the tile's so that a loop over tiles hoists it.\n\
             __device__ __forceinline__ void {}(unsigned (&words)[{n}], const unsigned* __restrict__ all_words, int tile, unsigned thread)\n{{",
            names.load_tile,
            wpt = program.words_per_tile(),
        );
        write_load_body(&mut s, program, Some(program.words_per_tile()));
        s.push_str("    (void)thread;\n}\n\n");
    }

    // ---- apply_loaded ----
    let _ = writeln!(
        s,
        "__device__ __forceinline__ void {}(float* __restrict__ acc, const unsigned (&words)[{n}], unsigned thread)\n{{",
        names.apply_loaded
    );
    let mut exprs: Vec<&Expr> = Vec::new();
    for t in program.tests() {
        exprs.push(&t.word);
        exprs.push(&t.bit);
        if let Some(c) = &t.column {
            exprs.push(c);
        }
    }
    let used = used_lets(lets, exprs);
    write_lets(&mut s, lets, &used);
    s.push_str("    const float ninf = fm_apply_neg_inf();\n");
    // Lets plus the per-test `col` binding, for printing.
    let mut with_col: Vec<Let> = lets.to_vec();
    with_col.push(Let {
        name: "col".into(),
        expr: Expr::lit(0),
        comment: String::new(),
    });
    for t in program.tests() {
        let fetch = &program.fetches()[t.fetch];
        let base = program.fetch_base(t.fetch);
        let v = t.value;
        let _ = writeln!(s, "    // {}", t.comment);
        let word = match t.word.as_lit() {
            Some(w) => format!("words[{}]", base + w),
            None => {
                // Run-time word choice, as FlashAttention-3 forks write it: a select chain.
                let mut chain = String::new();
                for j in 0..fetch.words - 1 {
                    let _ = write!(chain, "word == {j}u ? words[{}] : ", base + j);
                }
                let _ = write!(chain, "words[{}]", base + fetch.words - 1);
                chain
            }
        };
        match &t.column {
            Some(col) => {
                let _ = writeln!(
                    s,
                    "    {{\n        const unsigned col = {}; // tile column: col_t + value-mode offset\n        \
                     const unsigned word = {}; // RowMajor word of the column\n        \
                     const unsigned w = {word};\n        \
                     acc[{v}] = ((w >> ({})) & 1u) ? acc[{v}] : ninf;\n    }}",
                    col.cuda(lets),
                    t.word.cuda(&with_col),
                    t.bit.cuda(&with_col),
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "    acc[{v}] = (({word} >> {}) & 1u) ? acc[{v}] : ninf;",
                    t.bit.cuda(lets)
                );
            }
        }
    }
    s.push_str("    (void)thread;\n}\n\n");

    // ---- apply ----
    let _ = writeln!(
        s,
        "__device__ __forceinline__ void {}(float* __restrict__ acc, {}, unsigned thread)\n{{\n    \
         unsigned words[{n}];\n    {}(words, {}, thread);\n    {}(acc, words, thread);\n}}\n",
        names.apply,
        base_param(space),
        names.load,
        base_arg(space),
        names.apply_loaded,
    );
    if space == Space::Global {
        let _ = writeln!(
            s,
            "__device__ __forceinline__ void {}(float* __restrict__ acc, const unsigned* __restrict__ all_words, int tile, unsigned thread)\n{{\n    \
             unsigned words[{n}];\n    {}(words, all_words, tile, thread);\n    {}(acc, words, thread);\n}}\n",
            names.apply_tile, names.load_tile, names.apply_loaded,
        );
    }
    s
}
