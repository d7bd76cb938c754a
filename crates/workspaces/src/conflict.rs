//! What a model reads when a patch conflicts with its workspace: for each conflicting
//! file, the conflicting region with both versions (git's conflict markers) and the
//! patch's hunks for that file.

use std::collections::BTreeMap;

use crate::git::Git;

/// Longest report; a model needs the conflicting regions, not whole files.
const MAX_REPORT: usize = 16 * 1024;
/// Lines shown around a conflicting region.
const CONTEXT: usize = 2;

/// The report of a failed three-way apply of `patch`, whose unmerged entries are in
/// the index `merging` works on; `stderr` is what `git apply` said.
pub(crate) async fn report(merging: &Git, patch: &str, stderr: &str) -> String {
    let mut out = String::new();
    let unmerged = unmerged(merging).await;
    let mut shown = Vec::new();
    for (path, stages) in &unmerged {
        out.push_str(&format!("conflict in {path}:\n"));
        out.push_str(&describe(merging, stages).await);
        push_hunks(&mut out, patch, path);
        shown.push(path.clone());
    }
    // Refused before any merge (a file the patch creates already exists, one it
    // changes is gone): git names the files.
    for path in named_in(stderr) {
        if !shown.contains(&path) {
            push_hunks(&mut out, patch, &path);
            shown.push(path);
        }
    }
    if unmerged.is_empty() {
        out.push_str(&format!("git said: {stderr}\n"));
    }
    if out.len() > MAX_REPORT {
        let cut = (0..=MAX_REPORT)
            .rev()
            .find(|i| out.is_char_boundary(*i))
            .unwrap_or(0);
        out.truncate(cut);
        out.push_str("\n... (report truncated)\n");
    }
    out.trim_end().to_owned()
}

/// Object ids of one unmerged path by stage: 1 the common start, 2 the workspace,
/// 3 the patch.
type Stages = [Option<String>; 3];

async fn unmerged(git: &Git) -> BTreeMap<String, Stages> {
    let mut paths: BTreeMap<String, Stages> = BTreeMap::new();
    let Ok(out) = git
        .run_with_input("list conflicts", &["ls-files", "-u", "-z"], &[])
        .await
    else {
        return paths;
    };
    for entry in out.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let entry = String::from_utf8_lossy(entry);
        let Some((meta, path)) = entry.split_once('\t') else {
            continue;
        };
        let mut fields = meta.split(' ');
        let (_mode, oid, stage) = (fields.next(), fields.next(), fields.next());
        let (Some(oid), Some(stage)) = (oid, stage.and_then(|s| s.parse::<usize>().ok())) else {
            continue;
        };
        if let Some(slot) = paths
            .entry(path.to_owned())
            .or_default()
            .get_mut(stage.wrapping_sub(1))
        {
            *slot = Some(oid.to_owned());
        }
    }
    paths
}

/// The conflicting regions of a file both sides changed, or what happened to a file
/// one side created or deleted.
async fn describe(git: &Git, stages: &Stages) -> String {
    match stages {
        [Some(start), Some(ours), Some(theirs)] => {
            let merged = git
                .output(
                    &[
                        "merge-file",
                        "--object-id",
                        "-p",
                        "-L",
                        "your workspace",
                        "-L",
                        "start",
                        "-L",
                        "subagent",
                        ours,
                        start,
                        theirs,
                    ],
                    None,
                )
                .await;
            match merged {
                Ok(output) => regions(&String::from_utf8_lossy(&output.stdout)),
                Err(_) => String::new(),
            }
        }
        [None, Some(_), Some(_)] => "both your workspace and the subagent created it\n".into(),
        [_, None, Some(_)] => "your workspace deleted it; the subagent changed it\n".into(),
        [_, Some(_), None] => "the subagent deleted it; your workspace changed it\n".into(),
        _ => String::new(),
    }
}

/// The conflict-marked regions of a merged file, with a little context.
fn regions(merged: &str) -> String {
    let lines: Vec<&str> = merged.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].starts_with("<<<<<<< ") {
            i += 1;
            continue;
        }
        let end = (i..lines.len())
            .find(|j| lines[*j].starts_with(">>>>>>> "))
            .unwrap_or(lines.len() - 1);
        let from = i.saturating_sub(CONTEXT);
        let to = (end + CONTEXT).min(lines.len() - 1);
        out.push_str(&format!("(lines {}-{})\n", from + 1, to + 1));
        for line in &lines[from..=to] {
            out.push_str(line);
            out.push('\n');
        }
        i = end + 1;
    }
    out
}

/// Appends the patch's section for `path` (its hunks), if it has one.
fn push_hunks(out: &mut String, patch: &str, path: &str) {
    if let Some(section) = section(patch, path) {
        out.push_str(&format!("the subagent's change to {path}:\n"));
        out.push_str(section);
        if !section.ends_with('\n') {
            out.push('\n');
        }
    }
}

/// The part of `patch` about `path`: from its `diff --git` line to the next one.
fn section<'p>(patch: &'p str, path: &str) -> Option<&'p str> {
    let header = format!("diff --git a/{path} b/{path}\n");
    let start = if patch.starts_with(&header) {
        0
    } else {
        patch.find(&format!("\n{header}"))? + 1
    };
    let rest = &patch[start..];
    let end = rest[1..]
        .find("\ndiff --git ")
        .map_or(rest.len(), |i| i + 2);
    Some(&rest[..end])
}

/// Paths git's apply errors name: `patch failed: PATH:LINE`, `PATH: does not exist
/// in index`, `PATH: already exists in ...`.
fn named_in(stderr: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for line in stderr.lines() {
        let Some(rest) = line.strip_prefix("error: ") else {
            continue;
        };
        let path = if let Some(failed) = rest.strip_prefix("patch failed: ") {
            failed.rsplit_once(':').map(|(path, _line)| path)
        } else {
            rest.split_once(": ").map(|(path, _why)| path)
        };
        if let Some(path) = path.filter(|p| !p.is_empty() && !paths.iter().any(|q| q == p)) {
            paths.push(path.to_owned());
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATCH: &str = "diff --git a/a.txt b/a.txt\nindex 1..2 100644\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+child\ndiff --git a/b.txt b/b.txt\nnew file mode 100644\nindex 0..3\n--- /dev/null\n+++ b/b.txt\n@@ -0,0 +1 @@\n+new\n";

    #[test]
    fn sections_are_cut_at_the_next_file() {
        let a = section(PATCH, "a.txt").expect("a.txt");
        assert!(a.starts_with("diff --git a/a.txt b/a.txt\n"), "{a}");
        assert!(a.ends_with("+child\n"), "{a}");
        let b = section(PATCH, "b.txt").expect("b.txt");
        assert!(
            b.starts_with("diff --git a/b.txt") && b.ends_with("+new\n"),
            "{b}"
        );
        assert!(section(PATCH, "c.txt").is_none());
        assert!(section(PATCH, "txt").is_none());
    }

    #[test]
    fn regions_keep_the_markers_and_some_context() {
        let merged =
            "1\n2\n3\n<<<<<<< your workspace\nmine\n=======\ntheirs\n>>>>>>> subagent\n4\n5\n6\n";
        let shown = regions(merged);
        assert_eq!(
            shown,
            "(lines 2-10)\n2\n3\n<<<<<<< your workspace\nmine\n=======\ntheirs\n>>>>>>> subagent\n4\n5\n"
        );
    }

    #[test]
    fn apply_errors_name_their_files() {
        let stderr = "error: patch failed: src/a.rs:12\nerror: b.txt: already exists in working directory\nerror: c.txt: does not exist in index";
        assert_eq!(named_in(stderr), ["src/a.rs", "b.txt", "c.txt"]);
    }
}
