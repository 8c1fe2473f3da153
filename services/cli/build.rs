//! Records the git commit the binary is built from, for `actiond version`.
//!
//! `ACTIOND_GIT_COMMIT` (set by a build without a `.git`, e.g. a container build) wins;
//! otherwise `git rev-parse HEAD`; otherwise `unknown`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=ACTIOND_GIT_COMMIT");
    // A new commit or checkout moves HEAD's reflog: rebuild then, and only then.
    for path in ["HEAD", "logs/HEAD"] {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    let commit = std::env::var("ACTIOND_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&["rev-parse", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=ACTIOND_GIT_COMMIT={commit}");
}
