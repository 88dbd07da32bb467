//! One mask format: the file `fragmask pack --mask M.npy` writes, read by the attention's
//! `--mask` path, is the very `PackedMask` the attention's `--dense-mask` path packs from
//! the same `.npy` (lists, tile offsets and words equal), and it decodes to the mask.
//! Runs the built binary for the pack, as a user would.

use std::path::PathBuf;
use std::process::Command;

use fragmask::host::attention::AttentionShape;
use fragmask::inputs::attention::{dense_mask, packed_mask, MaskInput};
use fragmask::kernels::attention::Geometry;
use fragmask::masks::io::{write_npy, DType};

fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

/// A fresh directory, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "fragmask-pack-interop-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn fragmask_pack_file_equals_the_dense_mask_packed_by_the_attention_path() {
    let mut seed = 42u64;
    for &(b, h, sq, sk, keep) in &[
        (1usize, 1usize, 300usize, 260usize, 3u64),
        (2, 2, 257, 129, 2),
        (1, 3, 128, 384, 10),
        (1, 1, 100, 77, 2),
    ] {
        // Mix empty, full and partial tiles: whole blocks of rows/cols forced on or off.
        let dense: Vec<u8> = (0..b * h * sq * sk)
            .map(|idx| {
                let j = idx % sk;
                let i = (idx / sk) % sq;
                match (i / 128 + j / 128) % 3 {
                    0 => u8::from(lcg(&mut seed).is_multiple_of(keep)),
                    1 => 1,
                    _ => 0,
                }
            })
            .collect();
        let dir = Dir::new(&format!("{b}x{h}x{sq}x{sk}"));
        let npy = write_npy(DType::Bool, &[b, h, sq, sk], &dense);
        let npy_path = dir.0.join("m.npy");
        std::fs::write(&npy_path, &npy).unwrap();
        let packed_path = dir.0.join("m.safetensors");
        let out = Command::new(env!("CARGO_BIN_EXE_fragmask"))
            .args(["pack", "-q", "--mask"])
            .arg(&npy_path)
            .arg("-o")
            .arg(&packed_path)
            .output()
            .expect("run fragmask pack");
        assert!(out.status.success(), "{out:?}");
        let mut files: Vec<_> = std::fs::read_dir(&dir.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        files.sort();
        assert_eq!(files, ["m.npy", "m.safetensors"], "pack left other files");

        let shape = AttentionShape {
            batch: b,
            heads: h,
            kv_heads: 1,
            seqlen_q: sq,
            seqlen_k: sk,
            head_dim: 64,
        };
        let file = std::fs::read(&packed_path).unwrap();
        let MaskInput::Packed(from_file) = packed_mask(&file, &shape, "m.safetensors").unwrap()
        else {
            panic!("--mask gave a mask to pack");
        };
        let from_dense = dense_mask(&npy, &shape, "m.npy")
            .unwrap()
            .build(&shape, &Geometry::TILE_128X128)
            .unwrap();
        assert_eq!(*from_file, from_dense, "{b}x{h}x{sq}x{sk}");
        for bb in 0..b {
            for hh in 0..h {
                let plane = from_file.decode_plane(bb, hh);
                let want = &dense[(bb * h + hh) * sq * sk..(bb * h + hh + 1) * sq * sk];
                assert!(
                    plane.iter().zip(want).all(|(&p, &w)| p == (w != 0)),
                    "{b}x{h}x{sq}x{sk} plane ({bb}, {hh}) decodes to another mask"
                );
            }
        }
    }
}
