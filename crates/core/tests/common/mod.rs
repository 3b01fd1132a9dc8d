//! What the Rust integration tests share: the C fixtures, compiled with `cc` from
//! `__test__/fixtures/` into the test process's own directory.

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn fixtures() -> PathBuf {
    // Each crate is at crates/<name>; the fixtures are the Jest suite's, at the root.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join("__test__").join("fixtures")
}

/// Builds `source` with `defines` as `name.so`, once per name and test process; its path.
pub fn build(name: &str, source: &str, defines: &[String]) -> String {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fixtures-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("{name}.so"));
    if !out.exists() {
        // Built under a name of its own, then renamed: tests run in parallel, and a test must
        // never open a library another is still writing.
        let part = dir.join(format!("{name}.so.{:?}", std::thread::current().id()));
        let mut cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
        cc.args(["-shared", "-fPIC", "-O1", "-o"]).arg(&part);
        for d in defines {
            cc.arg(format!("-D{d}"));
        }
        let status = cc.arg(fixtures().join(source)).status().expect("cc runs");
        assert!(status.success(), "cc failed for {source}");
        std::fs::rename(&part, &out).unwrap();
    }
    out.to_string_lossy().into_owned()
}

