//! A fresh, empty directory per CLI test case, removed on drop: included with
//! `#[path = "support/temp_dir.rs"] mod temp_dir;` by the tests that run the binary and
//! check that it leaves nothing behind.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// A fresh directory under the system temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `fragmask-test-NAME-PID-N`, empty.
    pub fn new(name: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "fragmask-test-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// A path inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// A path inside the directory, as a string (for command lines).
    pub fn path(&self, name: &str) -> String {
        self.join(name).display().to_string()
    }

    /// Writes `bytes` to `name` inside the directory and returns its path as a string.
    pub fn write(&self, name: &str, bytes: &[u8]) -> String {
        std::fs::write(self.join(name), bytes).unwrap();
        self.path(name)
    }

    /// The names in the directory, sorted.
    pub fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
