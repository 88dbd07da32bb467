//! Every file reader of fragmask-masks on arbitrary bytes: each must return Ok or a
//! typed error, never panic, hang or allocate beyond the input's size.
#![no_main]

use fragmask_masks::io::{read_array, read_npy, SafetensorsFile};
use fragmask_masks::PackedMask;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = read_npy(data);
    if let Ok(view) = read_array(data, None) {
        let _ = view.to_i64("fuzz");
        let _ = view.mask_bytes("fuzz");
    }
    if let Ok(file) = SafetensorsFile::parse(data) {
        for name in file.names() {
            let _ = file.tensor(&name);
        }
    }
    if let Ok(packed) = PackedMask::from_safetensors(data) {
        // A file the reader accepts must decode without panicking.
        let s = packed.shape();
        let _ = packed.get(0, 0, s.seqlen_q - 1, s.seqlen_k - 1);
        let _ = packed.stats();
        // And so must its transposed lists, when it has them.
        if let Ok(t) = packed.transposed() {
            let _ = t.get(0, 0, s.seqlen_q - 1, s.seqlen_k - 1);
            let _ = t.get(0, 0, 0, 0);
        }
    }
});
