//! `fragmask demo`: a guided tour for newcomers.
//!
//! Each section runs the real library code and prints what it found, with the
//! equivalent command-line call so the reader can continue on their own.

use std::process::ExitCode;

use clap::Args;
use fragmask_gmma_frag::{quad_lane, warp, TiledAccumulator};
use fragmask_layout::{coalesce, composition, right_inverse, zipped_divide_by_mode, Layout};

use super::CmdResult;

/// Options of `fragmask demo`.
#[derive(Args)]
pub struct DemoArgs {}

/// Runs the tour.
pub fn run(_args: DemoArgs) -> CmdResult {
    layout_section().map_err(|e| format!("demo, layout section: {e}"))?;
    fragment_section().map_err(|e| format!("demo, fragment section: {e}"))?;
    masks_section().map_err(|e| format!("demo, masks section: {e}"))?;
    heading("4. Kernels: the generated mask-apply code, on the GPU when there is one");
    let report = super::verify::demo_gpu_section()?;
    print!("{report}");
    if report.contains("FAIL") {
        return Err("a kernel check failed (see above)".into());
    }
    Ok(ExitCode::SUCCESS)
}

fn heading(title: &str) {
    println!("\n== {title} ==");
}

/// The layout calculator on FlashAttention-3's wgmma accumulator.
fn layout_section() -> Result<(), Box<dyn std::error::Error>> {
    heading("1. Layouts: FlashAttention-3's accumulator, as CuTe sees it");
    let acc = Layout::parse("((4,8,4),(2,2,16)):((128,1,16),(64,8,512))")?;
    println!("A warpgroup's m64n128k16 wgmma accumulator is CuTe's CLayout_64x128:");
    println!("  C = {acc}");
    println!(
        "  It maps (thread, value) -> m + 64*n in the column-major 64x128 tile: size {} = 128 threads x {} values, cosize {}.",
        acc.size()?,
        acc.size()? / 128,
        acc.cosize()?
    );
    println!("  (fragmask layout 'size({acc})')");

    let (thread, value) = (37_i64, 5_i64);
    let index = acc.eval(thread + 128 * value)?;
    let (row, col) = (index % 64, index / 64);
    println!("\nWhere is thread {thread}'s value {value}?  C({thread} + 128*{value}) = {index} -> row {row}, col {col}.");
    let formula_row = 16 * (thread / 32) + (thread % 32) / 4 + 8 * ((value / 2) % 2);
    let formula_col = 8 * (value / 4) + 2 * (thread % 4) + (value % 2);
    if (formula_row, formula_col) != (row, col) {
        return Err(format!(
            "the layout says (row {row}, col {col}) but the PTX formula says ({formula_row}, {formula_col})"
        )
        .into());
    }
    println!(
        "  The PTX ISA formula agrees: row = 16*(t/32) + (t%32)/4 + 8*((i/2)%2) = {formula_row}, col = 8*(i/4) + 2*(t%4) + (i%2) = {formula_col}."
    );
    println!(
        "  (fragmask layout 'eval({acc}, {})')",
        thread + 128 * value
    );

    let inverse = right_inverse(&acc)?;
    let back = inverse.eval(index)?;
    println!("\nWho holds element (row {row}, col {col})?  The right inverse answers:");
    println!("  right_inverse(C) = {inverse}");
    println!(
        "  right_inverse(C)({index}) = {back} -> thread {}, value {}.",
        back % 128,
        back / 128
    );

    let thread0 = composition(&acc, &Layout::parse("(1,(2,2,16)):(0,(128,256,512))")?)?;
    println!(
        "\nThread 0's 64 values, as a layout of their own (composition of C with a value slice):"
    );
    println!("  {}  coalesced: {}", thread0, coalesce(&thread0)?);

    let tile = Layout::parse("(64,128):(1,64)")?;
    let kblocks = zipped_divide_by_mode(&tile, &[Layout::parse("64:1")?, Layout::parse("16:1")?])?;
    println!("\nP.V consumes the accumulator 16 columns at a time (RS-mode A operand).");
    println!("  zipped_divide((64,128):(1,64), <64:1,16:1>) = {kblocks}");
    println!(
        "  mode 1 walks the {} k-blocks of 64x16 each.",
        kblocks.mode(1)?.size()?
    );
    println!("\nTry it yourself: fragmask layout 'composition((6,2):(8,2),(4,3):(3,1))'");
    Ok(())
}

/// The proven fragment model of a FlashAttention-3 tile.
fn fragment_section() -> Result<(), Box<dyn std::error::Error>> {
    heading("2. Fragments: who holds what in a 128x128 tile with 2 warpgroups");
    let tile = TiledAccumulator::new(128, 128, 2, false)?;
    println!(
        "{} threads, {} values each (not 128: each warpgroup owns its own 64 rows).",
        tile.threads(),
        tile.values_per_thread()
    );
    println!("  TV layout: {}", tile.tv_layout());
    let thread = 133;
    let rows = tile.rows_of(thread)?;
    let cols = tile.cols_of(thread)?;
    println!(
        "\nThread {thread} (warp {}, quad_lane {}) holds rows {:?} (r and r+8, not r and r+1)",
        warp(thread),
        quad_lane(thread),
        rows.as_slice()
    );
    println!("  and columns {:?} ...", &cols.as_slice()[..8]);
    println!("  i.e. 8v + 2*quad_lane + {{0,1}} for v = 0..16.");
    let (row, col) = (77, 42);
    let (owner, value) = tile.owner(row, col)?;
    println!("\nElement (row {row}, col {col}) belongs to thread {owner}, value {value}.");
    println!("\nThe 8x8 top-left corner, as thread.value:");
    for r in 0..8 {
        let cells: Vec<String> = (0..8)
            .map(|c| tile.owner(r, c).map(|(t, v)| format!("{t:>3}.{v:<2}")))
            .collect::<Result<_, _>>()?;
        println!("  {}", cells.join(" "));
    }
    println!(
        "\nSee it whole: fragmask frag --block-m 128 --block-n 128 --warpgroups 2 --svg tile.svg"
    );
    Ok(())
}

/// Packs a top-k mask with each encoding and compares them.
fn masks_section() -> Result<(), Box<dyn std::error::Error>> {
    use fragmask_masks::{pack, Encoding, MaskShape, PackOptions, TopKMask};

    heading("3. Masks: a top-k mask, packed three ways");
    let (seqlen, keep) = (2048_usize, 256_usize);
    let shape = MaskShape::new(1, 1, seqlen, seqlen)?;
    // Each query keeps `keep` keys: a local window of 64 plus a strided spread, all
    // drawn by a small deterministic generator so the demo is reproducible.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut keys = Vec::with_capacity(seqlen * keep);
    for query in 0..seqlen {
        let mut row: Vec<i32> = (0..64)
            .map(|d| ((query + seqlen - d) % seqlen) as i32)
            .collect();
        while row.len() < keep {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let key = (state % seqlen as u64) as i32;
            if !row.contains(&key) {
                row.push(key);
            }
        }
        keys.extend(row);
    }
    let topk = TopKMask::from_fixed_k(shape, keep, &keys)?;
    let tile = TiledAccumulator::new(128, 128, 2, false)?;
    println!(
        "S = {seqlen}, k = {keep} keys per query ({:.1}% kept), tiles 128x128 for 2 warpgroups.",
        100.0 * keep as f64 / seqlen as f64
    );
    println!(
        "\n{:<16} {:>8} {:>6} {:>8} {:>12} {:>14} {:>10} {:>8}",
        "encoding",
        "partial",
        "full",
        "empty",
        "words bytes",
        "bytes/thread",
        "loads/thr",
        "memory"
    );
    let mut reference = None;
    for encoding in Encoding::ALL {
        let packed = pack(&topk, &tile, encoding, &PackOptions::default())?;
        let stats = packed.stats();
        let bytes = packed.bytes();
        let cost = encoding.load_cost(&tile);
        println!(
            "{:<16} {:>8} {:>6} {:>8} {:>12} {:>14} {:>10} {:>8}",
            encoding.name(),
            stats.partial,
            stats.full,
            stats.empty,
            bytes.words,
            cost.bytes_per_thread,
            cost.loads_per_thread,
            cost.memory
        );
        let plane = packed.decode_plane(0, 0);
        match &reference {
            None => reference = Some((plane, bytes)),
            Some((first, _)) if *first != plane => {
                return Err(format!("{} decodes to a different mask", encoding.name()).into())
            }
            Some(_) => {}
        }
    }
    if let Some((_, bytes)) = reference {
        println!(
            "\nEvery encoding decodes to the same mask. For comparison: dense bool {} bytes, plain bits {} bytes, lists {} bytes.",
            bytes.dense_bool, bytes.bit_packed, bytes.lists
        );
    }
    println!(
        "FragmentNative: one 8-byte load per thread per partial tile, straight into registers."
    );
    println!(
        "Pack your own: fragmask pack --topk idx.npy --seqlen-k 4096 --block 128x128 --warpgroups 2 -o mask.safetensors"
    );
    Ok(())
}
