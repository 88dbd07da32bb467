//! `fragmask frag`: which wgmma accumulator element each thread holds
//! (engine in [`fragmask::gmma_frag`]).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use fragmask::gmma_frag::{quad, quad_lane, warp, warpgroup, FragError, TiledAccumulator};
use fragmask::masks::io::write_file_atomically;
use serde_json::json;

use super::CmdResult;

/// Options of `fragmask frag`.
#[derive(Args)]
#[command(
    after_help = "Example: fragmask frag --block-m 128 --block-n 128 --warpgroups 2 --thread 37\n\
                        The tiling is FlashAttention-3's: warpgroup w owns rows [64w, 64w+64) of each\n\
                        64*warpgroups-row slab; the wgmma atom is m64nNk16 with N = block_n."
)]
pub struct FragArgs {
    /// Tile rows (kBlockM): a multiple of 64 x warpgroups (of block_n's role under --swap-ab).
    #[arg(long, default_value_t = 128)]
    pub block_m: u32,
    /// Tile columns (kBlockN): the wgmma N, a multiple of 8 in 8..=256.
    #[arg(long, default_value_t = 128)]
    pub block_n: u32,
    /// MMA warpgroups (1..=3).
    #[arg(long, default_value_t = 2)]
    pub warpgroups: u32,
    /// The MMA computes the transposed tile (block_n x block_m); coordinates stay in
    /// the block_m x block_n tile.
    #[arg(long)]
    pub swap_ab: bool,
    /// Only this thread: its (value -> row, col) list, rows and columns.
    #[arg(long)]
    pub thread: Option<u32>,
    /// Print one JSON object: block_m, block_n, warpgroups, threads, values_per_thread,
    /// elements ([thread, value, row, col], ...).
    #[arg(long)]
    pub json: bool,
    /// Draw the tile, coloured by warp (hue) and quad lane (lightness), to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// Prints the fragment map, and draws it when asked.
pub fn run(args: FragArgs) -> CmdResult {
    let acc = TiledAccumulator::new(args.block_m, args.block_n, args.warpgroups, args.swap_ab)
        .map_err(|e| {
            format!(
                "--block-m {} --block-n {} --warpgroups {}{}: {e}",
                args.block_m,
                args.block_n,
                args.warpgroups,
                if args.swap_ab { " --swap-ab" } else { "" }
            )
        })?;
    if let Some(thread) = args.thread {
        if thread >= acc.threads() {
            let e = FragError::ThreadOutOfRange {
                thread,
                threads: acc.threads(),
            };
            return Err(format!("--thread {thread}: {e}"));
        }
    }
    if let Some(path) = &args.svg {
        write_file_atomically(path, svg(&acc)?.as_bytes()).map_err(|e| e.to_string())?;
    }
    if args.json {
        println!("{}", to_json(&acc, args.thread)?);
    } else {
        print!("{}", summary(&acc, args.thread)?);
        if let Some(path) = &args.svg {
            println!("wrote {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn threads_of(acc: &TiledAccumulator, thread: Option<u32>) -> std::ops::Range<u32> {
    match thread {
        Some(t) => t..t + 1,
        None => 0..acc.threads(),
    }
}

fn to_json(acc: &TiledAccumulator, thread: Option<u32>) -> Result<String, String> {
    let mut elements = Vec::new();
    for t in threads_of(acc, thread) {
        for v in 0..acc.values_per_thread() {
            let (row, col) = acc.coord(t, v).map_err(|e| e.to_string())?;
            elements.push(json!([t, v, row, col]));
        }
    }
    // Field order as documented: block_m, block_n, warpgroups, threads,
    // values_per_thread, elements.
    Ok(format!(
        "{{\"block_m\":{},\"block_n\":{},\"warpgroups\":{},\"threads\":{},\"values_per_thread\":{},\"elements\":{}}}",
        json!(acc.block_m()),
        json!(acc.block_n()),
        json!(acc.warpgroups()),
        json!(acc.threads()),
        json!(acc.values_per_thread()),
        serde_json::Value::Array(elements)
    ))
}

fn summary(acc: &TiledAccumulator, thread: Option<u32>) -> Result<String, String> {
    let mut out = String::new();
    let atom = acc.atom();
    let (m_side, n_side) = if acc.swap_ab() {
        (acc.block_n(), acc.block_m())
    } else {
        (acc.block_m(), acc.block_n())
    };
    let w = acc.warpgroups();
    let _ = writeln!(
        out,
        "{}x{} tile, wgmma m64n{}k16 f32 accumulator, {} warpgroup{} ({} threads){}",
        acc.block_m(),
        acc.block_n(),
        atom.n(),
        w,
        if w == 1 { "" } else { "s" },
        acc.threads(),
        if acc.swap_ab() {
            ", SwapAB (the MMA computes the transposed tile)"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "atom CLayout_64x{}: {}", atom.n(), atom.c_layout());
    let _ = writeln!(
        out,
        "MMA tile {m_side}x{n_side}: MMA_M = {} (atoms along M per warpgroup), MMA_N = {}; warpgroup w owns MMA rows 64*(w + {w}*mma_m) + [0, 64)",
        acc.mma_m(),
        acc.mma_n()
    );
    let _ = writeln!(
        out,
        "TV layout (thread, value) -> row + {}*col: {}",
        acc.block_m(),
        acc.tv_layout()
    );
    let _ = writeln!(
        out,
        "per thread: fragment {} = {} values; rowcol view {} = {} rows x {} columns",
        acc.fragment_layout().shape(),
        acc.values_per_thread(),
        acc.rowcol_layout().shape(),
        acc.rows_per_thread(),
        acc.cols_per_thread()
    );
    let _ = writeln!(
        out,
        "thread t (lt = t % 128), value v (i = v % {}): MMA row = 64*(t/128 + {w}*mma_m) + 16*(lt/32) + (lt%32)/4 + 8*((i/2)%2), \
         MMA col = 8*(i/4) + 2*(t%4) + i%2",
        atom.registers()
    );
    let Some(t) = thread else {
        return Ok(out);
    };
    let _ = writeln!(
        out,
        "\nthread {t}: warpgroup {}, warp {}, lane {}, quad {}, quad_lane {}",
        warpgroup(t),
        warp(t),
        t % 32,
        quad(t),
        quad_lane(t)
    );
    let rows = acc.rows_of(t).map_err(|e| e.to_string())?;
    let cols = acc.cols_of(t).map_err(|e| e.to_string())?;
    let _ = writeln!(out, "rows ({}): {:?}", rows.len(), rows.as_slice());
    let _ = writeln!(out, "columns ({}): {:?}", cols.len(), cols.as_slice());
    let _ = writeln!(out, "value -> (row, col):");
    for v in 0..acc.values_per_thread() {
        let (row, col) = acc.coord(t, v).map_err(|e| e.to_string())?;
        let _ = writeln!(out, "  {v:>4} -> ({row}, {col})");
    }
    Ok(out)
}

/// `hsl` fill of a thread: hue by warp, lightness by quad lane.
fn fill(thread: u32, warps: u32) -> String {
    let hue = (warp(thread) * 360 / warps.max(1) + 10) % 360;
    let lightness = [42, 54, 66, 78][quad_lane(thread) as usize];
    format!("hsl({hue},70%,{lightness}%)")
}

fn svg(acc: &TiledAccumulator) -> Result<String, String> {
    let (bm, bn) = (acc.block_m(), acc.block_n());
    let largest = bm.max(bn);
    // Cells large enough for "T<thread>/V<value>" labels on small tiles, small cells
    // (hover for details) on large ones.
    let cell: u32 = (1600 / largest).clamp(6, 30);
    let labelled = cell >= 24;
    let margin_left = 44;
    let margin_top = 58;
    let grid_w = bn * cell;
    let grid_h = bm * cell;
    let legend_w = 330;
    let width = margin_left + grid_w + 20 + legend_w;
    let height = (margin_top + grid_h + 20).max(margin_top + 40 + 22 * acc.threads() / 32 + 160);
    let warps = acc.threads() / 32;
    let mut s = String::with_capacity((bm * bn * 110) as usize);
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Arial, sans-serif">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="{width}" height="{height}" fill="white"/>"#
    );
    // One CSS class per (warp, quad lane) keeps the per-cell markup short.
    s.push_str("<style>");
    for t in (0..acc.threads()).filter(|t| t % 32 < 4) {
        let _ = write!(
            s,
            ".c{}{{fill:{}}}",
            4 * warp(t) + quad_lane(t),
            fill(t, warps)
        );
    }
    s.push_str("</style>\n");
    let _ = writeln!(
        s,
        r#"<text x="{margin_left}" y="16" font-size="14" font-weight="bold">wgmma accumulator: {bm}x{bn} tile, {} warpgroup(s), {} threads, {} values each{}</text>"#,
        acc.warpgroups(),
        acc.threads(),
        acc.values_per_thread(),
        if acc.swap_ab() { ", SwapAB" } else { "" }
    );
    let _ = writeln!(
        s,
        r##"<text x="{margin_left}" y="34" font-size="11" fill="#444">rows down, columns across; hover a cell for thread, value, row, col, warp, quad lane</text>"##
    );
    // Axis ticks every 8 rows / columns.
    let tick = if cell >= 12 { 8 } else { 16 };
    for r in (0..bm).step_by(tick) {
        let y = margin_top + r * cell + cell.min(12);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{y}" font-size="10" text-anchor="end">{r}</text>"#,
            margin_left - 4
        );
    }
    for c in (0..bn).step_by(tick) {
        let x = margin_left + c * cell;
        let _ = writeln!(
            s,
            r#"<text x="{x}" y="{}" font-size="10">{c}</text>"#,
            margin_top - 3
        );
    }
    let font = (cell as f32 * 0.34).max(6.0);
    for r in 0..bm {
        for c in 0..bn {
            let (t, v) = acc.owner(r, c).map_err(|e| e.to_string())?;
            let (x, y) = (margin_left + c * cell, margin_top + r * cell);
            let _ = write!(
                s,
                r#"<rect x="{x}" y="{y}" width="{cell}" height="{cell}" class="c{}"><title>thread {t}, value {v}, row {r}, col {c}, warp {}, quad_lane {}</title></rect>"#,
                4 * warp(t) + quad_lane(t),
                warp(t),
                quad_lane(t)
            );
            if labelled {
                let cx = x as f32 + cell as f32 / 2.0;
                let _ = write!(
                    s,
                    r#"<text x="{cx}" y="{:.1}" font-size="{font:.1}" text-anchor="middle"><tspan x="{cx}">T{t}</tspan><tspan x="{cx}" dy="{:.1}">V{v}</tspan></text>"#,
                    y as f32 + cell as f32 * 0.45,
                    font * 1.1
                );
            }
            s.push('\n');
        }
    }
    // Grid lines: thin every 8 rows/columns, thick at warpgroup slabs (64 MMA rows).
    let stroke = |s: &mut String, x1: u32, y1: u32, x2: u32, y2: u32, w: f32| {
        let _ = writeln!(
            s,
            r##"<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#222" stroke-width="{w}"/>"##
        );
    };
    let (m_major_rows, along_rows) = if acc.swap_ab() {
        (bn, false)
    } else {
        (bm, true)
    };
    let _ = m_major_rows;
    for r in (0..=bm).step_by(8) {
        let slab = along_rows && r % 64 == 0;
        stroke(
            &mut s,
            margin_left,
            margin_top + r * cell,
            margin_left + grid_w,
            margin_top + r * cell,
            if slab { 2.0 } else { 0.5 },
        );
    }
    for c in (0..=bn).step_by(8) {
        let slab = !along_rows && c % 64 == 0;
        stroke(
            &mut s,
            margin_left + c * cell,
            margin_top,
            margin_left + c * cell,
            margin_top + grid_h,
            if slab { 2.0 } else { 0.5 },
        );
    }
    // Legend: one swatch row per warp, lightness per quad lane.
    let lx = margin_left + grid_w + 20;
    let mut ly = margin_top + 10;
    let _ = writeln!(
        s,
        r#"<text x="{lx}" y="{ly}" font-size="12" font-weight="bold">warp (hue) x quad lane (lightness)</text>"#
    );
    ly += 10;
    for q in 0..4 {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" font-size="10" text-anchor="middle">q{q}</text>"#,
            lx + 104 + q * 26 + 11,
            ly + 10
        );
    }
    ly += 16;
    for w in 0..warps {
        let _ = writeln!(
            s,
            r#"<text x="{lx}" y="{}" font-size="11">warp {w} (wg {})</text>"#,
            ly + 14,
            w / 4
        );
        for q in 0..4 {
            let _ = writeln!(
                s,
                r##"<rect x="{}" y="{ly}" width="22" height="18" fill="{}" stroke="#222" stroke-width="0.5"/>"##,
                lx + 104 + q * 26,
                fill(32 * w + q, warps)
            );
        }
        ly += 22;
    }
    ly += 14;
    let notes = [
        "thread t holds MMA rows 16*(warp%4) + (t%32)/4".to_string(),
        "  + {0, 8} (+64 per warpgroup / atom along M)".to_string(),
        "and MMA columns 8v + 2*quad_lane + {0, 1}".to_string(),
        if labelled {
            "cell label: T&lt;thread&gt; / V&lt;value&gt;".to_string()
        } else {
            "hover a cell for its thread and value".to_string()
        },
        if acc.swap_ab() {
            "thick lines: 64-column slabs (MMA rows under SwapAB)".to_string()
        } else {
            "thick lines: 64-row slabs (one warpgroup atom each)".to_string()
        },
    ];
    for note in notes {
        let _ = writeln!(
            s,
            r##"<text x="{lx}" y="{ly}" font-size="11" fill="#333">{note}</text>"##
        );
        ly += 16;
    }
    s.push_str("</svg>\n");
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc() -> TiledAccumulator {
        TiledAccumulator::new(128, 128, 2, false).unwrap()
    }

    #[test]
    fn json_has_exactly_the_documented_fields_in_order() {
        let text = to_json(&acc(), None).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            [
                "block_m",
                "block_n",
                "elements",
                "threads",
                "values_per_thread",
                "warpgroups"
            ]
        );
        assert!(text.starts_with(
            r#"{"block_m":128,"block_n":128,"warpgroups":2,"threads":256,"values_per_thread":64,"elements":[[0,0,0,0],"#
        ));
        assert_eq!(value["elements"].as_array().unwrap().len(), 128 * 128);
    }

    #[test]
    fn json_with_a_thread_lists_only_that_threads_elements() {
        let text = to_json(&acc(), Some(37)).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let elements = value["elements"].as_array().unwrap();
        assert_eq!(elements.len(), 64);
        assert!(elements.iter().all(|e| e[0] == 37));
        assert_eq!(elements[2], json!([37, 2, 25, 2]));
    }

    #[test]
    fn svg_has_one_titled_cell_per_element_and_escapes_its_text() {
        let a = TiledAccumulator::new(64, 16, 1, false).unwrap();
        let text = svg(&a).unwrap();
        assert_eq!(text.matches("<title>").count(), 64 * 16);
        assert!(
            text.contains("<title>thread 37, value 6, row 25, col 10, warp 1, quad_lane 1</title>")
        );
        assert!(!text.contains("T<thread>"));
    }

    #[test]
    fn svg_is_written_atomically_and_unwritable_paths_are_errors() {
        let dir = std::env::temp_dir().join(format!("fragmask-frag-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tile.svg");
        write_file_atomically(&path, b"<svg/>").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "<svg/>");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temp file left behind"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        let err = write_file_atomically(std::path::Path::new("/nonexistent-dir/x.svg"), b"<svg/>")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "refusing to write /nonexistent-dir/x.svg: its directory /nonexistent-dir"
            ),
            "{err}"
        );
    }
}
