//! The packed-mask checksum path: a valid, checksummed file with fuzz-chosen bytes
//! overwritten is refused with a typed error or loads as exactly the mask written.
#![no_main]

use std::sync::OnceLock;

use fragmask_masks::io::{verify_checksums, SafetensorsFile};
use fragmask_masks::{pack, DenseMask, Encoding, PackOptions, PackedMask};
use libfuzzer_sys::fuzz_target;

fn sample() -> &'static (PackedMask, Vec<u8>) {
    static SAMPLE: OnceLock<(PackedMask, Vec<u8>)> = OnceLock::new();
    SAMPLE.get_or_init(|| {
        // 200 x 150, causal-ish with holes: empty, full and partial 64 x 64 tiles.
        let data: Vec<u8> = (0..200 * 150)
            .map(|i: usize| u8::from(i % 150 <= i / 150 && i % 7 != 3))
            .collect();
        let dense = DenseMask::new(&data, &[200, 150]).expect("a valid dense mask");
        let acc =
            fragmask::gmma_frag::TiledAccumulator::new(64, 64, 1, false).expect("a legal tile");
        let packed = pack(
            &dense,
            &acc,
            Encoding::FragmentNative,
            &PackOptions::default(),
        )
        .expect("packs");
        let bytes = packed.to_safetensors().expect("serialises");
        (packed, bytes)
    })
}

fuzz_target!(|data: &[u8]| {
    let (packed, good) = sample();
    let mut bytes = good.clone();
    // Each 3 input bytes: a position (2 bytes) and a value.
    for edit in data.chunks_exact(3) {
        let at = usize::from(u16::from_le_bytes([edit[0], edit[1]])) % bytes.len();
        bytes[at] = edit[2];
    }
    if let Ok(file) = SafetensorsFile::parse(&bytes) {
        let _ = verify_checksums(&file);
    }
    if let Ok(read) = PackedMask::from_safetensors(&bytes) {
        assert_eq!(&read, packed, "a changed file loaded as another mask");
    }
});
