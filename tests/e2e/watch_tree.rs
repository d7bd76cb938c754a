//! `taskwire watch --tree`: a parent and its two children followed live from the
//! terminal, with plain lines when stdout is a pipe and a tree redrawn in place when it
//! is a terminal (a pseudo-terminal from util-linux `script`).

use std::time::Duration;

use taskwire_e2e::process::Taskwire;
use taskwire_e2e::{Cluster, PATIENCE, start_with};
use taskwire_protocol::pb;
use taskwire_test_support::ScriptedModel;

use crate::dashboard::{ASKER, script};

async fn cluster(config: &tempfile::TempDir) -> Cluster {
    let agents = config.path().join("agents");
    std::fs::create_dir_all(&agents).expect("mkdir");
    std::fs::write(agents.join("asker.md"), ASKER).expect("write agent");
    let dir = config.path().to_owned();
    let mut cluster = start_with(ScriptedModel::start(script).await, 0, 1, move |c| {
        c.config_dir = Some(dir);
    })
    .await
    .expect("cluster");
    cluster.add_worker("w0", 2);
    cluster.add_worker("w1", 2);
    cluster
}

/// Waits until `output()` contains `needle`.
async fn wait_for_output(output: impl Fn() -> String, needle: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !output().contains(needle) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never printed `{needle}`:\n{}",
            output()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Answers the asking child's approval once it asks.
async fn approve_the_asker(cluster: &Cluster, parent: &str) -> String {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let ask = loop {
        if let Ok(a) = cluster.approval_asked(parent).await {
            break a;
        }
        assert!(tokio::time::Instant::now() < deadline, "no approval asked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut client = cluster.client().await.expect("client");
    client
        .approve(pb::ApproveRequest {
            task_id: ask.task_id.clone(),
            request_id: ask.request_id,
            answer: pb::ApprovalAnswer::Once as i32,
            message: String::new(),
        })
        .await
        .expect("approve");
    ask.task_id
}

#[tokio::test]
async fn watch_tree_prints_a_plain_line_per_change_of_every_task_when_stdout_is_a_pipe() {
    let config = tempfile::tempdir().expect("config");
    let cluster = cluster(&config).await;
    let parent = cluster
        .submit("general", "parent: two children")
        .await
        .expect("submit");
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let addr = cluster.url();
    let mut watch = taskwire
        .spawn_with_env("watch", &["watch", "--tree", &parent, "--addr", &addr], &[])
        .expect("taskwire watch --tree");
    wait_for_output(|| watch.stdout(), "--answer once|always|reject").await;
    let asker = approve_the_asker(&cluster, &parent).await;
    let status = tokio::time::timeout(PATIENCE, watch.wait())
        .await
        .expect("watch ends in time")
        .expect("watch exits");
    let out = watch.stdout();
    assert!(status.success(), "{out}\n{}", watch.stderr());
    let short = |id: &str| id[id.len() - 8..].to_owned();
    for line in [
        format!(
            "{} asker: asks for bash echo approved > approved.txt",
            short(&asker)
        ),
        format!(
            "{} asker: tool bash [running] write approved.txt",
            short(&asker)
        ),
        format!("{} asker: completed", short(&asker)),
        format!("{} general: started asker {asker}", short(&parent)),
        format!("{} general: completed", short(&parent)),
        "explore: completed".to_owned(),
        "result: completed".to_owned(),
    ] {
        assert!(out.contains(&line), "missing `{line}` in:\n{out}");
    }
    assert!(!out.contains('\x1b'), "no terminal codes in a pipe:\n{out}");
}

#[tokio::test]
async fn watch_tree_redraws_the_tree_in_place_on_a_terminal() {
    let config = tempfile::tempdir().expect("config");
    let cluster = cluster(&config).await;
    let parent = cluster
        .submit("general", "parent: two children")
        .await
        .expect("submit");
    let taskwire = Taskwire::locate().expect("taskwire binary");
    // util-linux `script` runs the command on a pseudo-terminal.
    let command = format!(
        "{} watch --tree {parent} --addr {}",
        taskwire.bin().display(),
        cluster.url()
    );
    let mut watch = taskwire
        .spawn_program("script", &["-qfec", &command, "/dev/null"])
        .expect("script");
    wait_for_output(|| watch.stdout(), "[awaiting_approval]").await;
    approve_the_asker(&cluster, &parent).await;
    let status = tokio::time::timeout(PATIENCE, watch.wait())
        .await
        .expect("watch ends in time")
        .expect("watch exits");
    let out = watch.stdout();
    assert!(status.success(), "{out}\n{}", watch.stderr());
    assert!(
        out.contains("\x1b[J"),
        "frames are cleared and redrawn:\n{out}"
    );
    // The last frame: the parent with both children under it, all completed.
    let last = out.rsplit("\x1b[J").next().expect("a last frame");
    let nodes: Vec<&str> = last.lines().filter(|l| l.contains("[completed]")).collect();
    assert_eq!(nodes.len(), 3, "{last}");
    assert!(nodes[0].contains("general"), "{last}");
    assert!(
        nodes[1].starts_with("├─ ") && nodes[2].starts_with("└─ "),
        "{last}"
    );
}
