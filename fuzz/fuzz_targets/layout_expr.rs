//! The layout calculator (`fragmask layout EXPR`: parser, evaluator, notes, renderers)
//! on arbitrary text: each expression gives a value or a `CalcError` whose caret lies
//! inside the expression, never a panic, a stack overflow or a hang. A layout result
//! printed in CuTe notation evaluates back to itself.
#![no_main]

use fragmask::calc::{self, Value};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let expr = String::from_utf8_lossy(data);
    match calc::evaluate_with_notes(&expr) {
        Ok((value, _notes)) => {
            let _ = calc::to_json(&expr, &value);
            if let Value::Layout(layout) = value {
                if layout.size().is_ok_and(|s| s <= 4096) {
                    let _ = calc::table(&layout);
                }
                let printed = layout.to_string();
                assert_eq!(
                    calc::evaluate(&printed),
                    Ok(value),
                    "{expr:?} printed {printed}"
                );
            }
        }
        Err(error) => {
            assert!(error.position <= expr.len(), "{expr:?}: {error:?}");
            let _ = error.render(&expr);
        }
    }
});
