//! What a session's model sees besides the prompt: the environment block and the
//! project's instructions (`AGENTS.md` in the workspace, then configured files).

use taskwire_e2e::start;
use taskwire_protocol::pb;
use taskwire_test_support::ScriptedModel;

#[tokio::test]
async fn the_model_sees_agents_md_and_configured_instruction_files() {
    let mut cluster = start(ScriptedModel::echo().await, 0, 1)
        .await
        .expect("cluster");
    let ws = cluster.workspace.path().to_owned();
    std::fs::write(
        ws.join("AGENTS.md"),
        "Run `make check` before you answer.\n",
    )
    .expect("write");
    std::fs::create_dir(ws.join("docs")).expect("mkdir");
    std::fs::write(ws.join("docs/style.md"), "Name tests for behaviour.\n").expect("write");
    cluster.add_worker_with("w", 1, |c| {
        c.instructions = vec!["docs/style.md".to_owned()];
    });

    let id = cluster.submit("general", "hello").await.expect("submit");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed);

    let requests = cluster.model.requests();
    let system = requests[0]
        .messages
        .iter()
        .find(|m| m.role == "system")
        .map(|m| m.content.clone())
        .expect("a system message");
    assert!(
        system.contains("<instructions file=\"AGENTS.md\">\nRun `make check` before you answer."),
        "{system}"
    );
    assert!(
        system.contains("<instructions file=\"docs/style.md\">\nName tests for behaviour."),
        "{system}"
    );
    assert!(system.contains(&format!("workspace root: {}", ws.display())));
    assert!(system.contains("is the workspace a git repository: no"));
    let agents_at = system.find("AGENTS.md").expect("agents");
    let style_at = system.find("docs/style.md").expect("style");
    assert!(agents_at < style_at, "project instructions come first");
    cluster.shutdown().await;
}
