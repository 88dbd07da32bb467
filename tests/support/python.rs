//! The Python interpreter of the tests that run numpy and safetensors (the decoders of
//! docs/masks.md): `$FRAGMASK_TEST_PYTHON` (scripts/test.sh points it at the venv that
//! scripts/install-pyenv.sh creates) or `python3`. Without numpy and safetensors a test
//! prints a plain "SKIPPED" line; under `CI=true` it fails (docs/CONVENTIONS.md).

use std::process::Command;

/// The interpreter to run, when it imports numpy and safetensors; `None` (after printing
/// why) when it does not and CI is not set. Panics under `CI=true` without them.
pub fn numpy_safetensors_python() -> Option<String> {
    let python = std::env::var("FRAGMASK_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = Command::new(&python)
        .args(["-c", "import numpy, safetensors.numpy"])
        .output();
    if probe.is_ok_and(|o| o.status.success()) {
        return Some(python);
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!(
            "{python} cannot import numpy and safetensors, required under CI=true \
             (scripts/test.sh installs them with scripts/install-pyenv.sh)"
        );
    }
    println!(
        "SKIPPED: {python} with numpy and safetensors not found (run scripts/install-pyenv.sh)"
    );
    None
}

/// Runs the docs/masks.md decoder `decoder` (a Python file) on the packed file `packed`
/// with its function `decode` and asserts that the result equals the bool `.npy` mask
/// `want`, shape and every element; `what` names the case in a failure.
pub fn assert_decodes_to(
    python: &str,
    decoder: &std::path::Path,
    decode: &str,
    packed: &std::path::Path,
    want: &std::path::Path,
    what: &str,
) {
    let script = format!(
        "import sys, numpy as np\nexec(open(sys.argv[1]).read())\n\
         got = {decode}(sys.argv[2])\n\
         want = np.load(sys.argv[3]).astype(bool)\n\
         assert got.shape == want.shape, (got.shape, want.shape)\n\
         assert (got == want).all(), int((got != want).sum())\nprint('ok')\n"
    );
    let run = Command::new(python)
        .arg("-c")
        .arg(&script)
        .arg(decoder)
        .arg(packed)
        .arg(want)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
}
