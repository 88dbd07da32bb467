//! The compile cache's entry reader on arbitrary bytes: every input is an entry of
//! the key asked for (and then re-encodes to the same bytes) or a typed defect; it
//! never panics, hangs or allocates beyond the input's size.
#![no_main]

use fragmask_host::cache::{decode_entry, encode_entry};
use libfuzzer_sys::fuzz_target;

const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fuzz_target!(|data: &[u8]| {
    for kind in ["cubin", "ptx"] {
        if let Ok(entry) = decode_entry(data, KEY, kind) {
            // Accepted only if it is exactly what the writer makes of its content.
            assert_eq!(encode_entry(KEY, kind, &entry.payload, &entry.log), data);
        }
    }
    // A valid entry with the fuzz input as content round-trips.
    let log = String::from_utf8_lossy(data);
    let bytes = encode_entry(KEY, "cubin", data, &log);
    let entry = decode_entry(&bytes, KEY, "cubin").expect("a written entry reads back");
    assert_eq!(entry.payload, data);
});
