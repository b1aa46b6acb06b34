//! Names the commit the binary was built from, for `exitvoice --version` (`EXITVOICE_COMMIT`):
//! the `EXITVOICE_COMMIT` variable when the builder sets one (a source archive has no `.git`),
//! else `git rev-parse` in this source tree, else "unknown". It reruns when HEAD moves or the
//! branch gets a commit, not on every edit of the tree.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `git ARGS` run in this source tree: its trimmed output, or None (no git, not a repository).
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// The commit of this source tree, and the files whose change means a new commit: HEAD, the
/// branch's loose ref (or the folder it appears in), the packed refs.
fn from_git() -> Option<(String, Vec<PathBuf>)> {
    // A tree unpacked inside some other repository is not that repository's commit.
    let top = git(&["rev-parse", "--show-toplevel"])?;
    if Path::new(&top).canonicalize().ok()?
        != Path::new(env!("CARGO_MANIFEST_DIR")).canonicalize().ok()?
    {
        return None;
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    let mut watched = Vec::new();
    let git_path = |name: &str| git(&["rev-parse", "--git-path", name]).map(PathBuf::from);
    watched.extend(git_path("HEAD"));
    watched.extend(git_path("packed-refs").filter(|path| path.exists()));
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        // A missing path would rerun the script on every build: watch the folder where a
        // packed branch's next commit writes its loose ref.
        watched.extend(git_path(&branch).and_then(|path| match path.exists() {
            true => Some(path),
            false => path.parent().map(Path::to_path_buf),
        }));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    Some((
        commit,
        watched.into_iter().map(|path| root.join(path)).collect(),
    ))
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=EXITVOICE_COMMIT");
    let given = std::env::var("EXITVOICE_COMMIT")
        .ok()
        .filter(|commit| !commit.is_empty());
    let commit = match given {
        Some(commit) => commit,
        None => match from_git() {
            Some((commit, watched)) => {
                for path in watched {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
                commit
            }
            None => "unknown".to_owned(),
        },
    };
    println!("cargo:rustc-env=EXITVOICE_COMMIT={commit}");
}
