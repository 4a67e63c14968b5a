//! The build's identity for `weft --version`: the commit it was built from (`WEFT_BUILD_ID`
//! overrides it, for builds outside a git checkout), the profile and the target.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=WEFT_BUILD_ID");
    let id = std::env::var("WEFT_BUILD_ID").ok().or_else(|| {
        let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
        let date = git(&["log", "-1", "--format=%cs"]).unwrap_or_default();
        Some(format!("commit {commit} {date}").trim().to_string())
    });
    // A new commit rebuilds: HEAD moves, or the branch it names does.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
    }
    if let (Some(common), Some(head)) = (
        git(&["rev-parse", "--git-common-dir"]),
        git(&["symbolic-ref", "-q", "HEAD"]),
    ) {
        println!("cargo:rerun-if-changed={common}/{head}");
        println!("cargo:rerun-if-changed={common}/packed-refs");
    }
    let profile = std::env::var("PROFILE").unwrap_or_default();
    let target = std::env::var("TARGET").unwrap_or_default();
    println!(
        "cargo:rustc-env=WEFT_BUILD={}, {profile}, {target}",
        id.unwrap_or_else(|| "commit unknown".into())
    );
}
