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
        .system_prompt()
        .map(str::to_owned)
        .expect("a system message");
    assert!(
        system.contains("<instructions file=\"AGENTS.md\">\nRun `make check` before you answer."),
        "{system}"
    );
    assert!(
        system.contains("<instructions file=\"docs/style.md\">\nName tests for behaviour."),
        "{system}"
    );
    // The task's own copy of the base, not the base.
    let root = system
        .lines()
        .find_map(|l| l.strip_prefix("workspace root: "))
        .expect("the workspace root is named");
    assert_ne!(std::path::Path::new(root), ws.as_path(), "{system}");
    assert!(system.contains("is the workspace a git repository: no"));
    let agents_at = system.find("AGENTS.md").expect("agents");
    let style_at = system.find("docs/style.md").expect("style");
    assert!(agents_at < style_at, "project instructions come first");
    cluster.shutdown().await;
}

#[tokio::test]
async fn inputs_refs_and_attachments_reach_the_first_user_message() {
    let cluster = start(ScriptedModel::echo().await, 1, 1)
        .await
        .expect("cluster");
    let ws = cluster.workspace.path().to_owned();
    std::fs::write(ws.join("notes.md"), "the flaky test is in retries.rs\n").expect("write");
    std::fs::write(ws.join("plan.md"), "step one: read\n").expect("write");
    let mut client = cluster.client().await.expect("client");
    let id = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: "follow @plan.md".into(),
            input: Some(prost_types::Struct {
                fields: [(
                    "ticket".to_owned(),
                    prost_types::Value {
                        kind: Some(prost_types::value::Kind::NumberValue(42.0)),
                    },
                )]
                .into(),
            }),
            context_refs: vec![pb::ContextRef {
                r#type: "file".into(),
                id: "notes.md".into(),
                uri: String::new(),
            }],
            attachments: vec![pb::Attachment {
                name: "log.txt".into(),
                media_type: "text/plain".into(),
                uri: String::new(),
                data: b"error: timeout after 5s".to_vec(),
            }],
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed);
    let requests = cluster.model.requests();
    let user = requests[0].first_user_message().expect("a user message");
    assert!(user.starts_with("follow @plan.md"), "{user}");
    for part in [
        "<file path=\"plan.md\">\nstep one: read",
        "<input>\n{\n  \"ticket\": 42.0\n}\n</input>",
        "<context type=\"file\" path=\"notes.md\">\nthe flaky test is in retries.rs",
        "<attachment name=\"log.txt\" media_type=\"text/plain\">\nerror: timeout after 5s",
    ] {
        assert!(user.contains(part), "missing {part:?} in {user}");
    }
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_context_ref_outside_the_workspace_is_refused_with_the_reason() {
    let cluster = start(ScriptedModel::echo().await, 1, 1)
        .await
        .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let with_ref = |path: &str| pb::SubmitRequest {
        agent: "general".into(),
        prompt: "read it".into(),
        context_refs: vec![pb::ContextRef {
            r#type: "file".into(),
            id: path.into(),
            uri: String::new(),
        }],
        ..Default::default()
    };
    let err = client
        .submit(with_ref("../../etc/passwd"))
        .await
        .expect_err("refused at submit");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("context_refs"), "{}", err.message());

    // A symlink out of the workspace is only known where the workspace is: the worker
    // fails the task, naming the ref, and the model is never asked.
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("secret"), "do not read").expect("write");
    std::os::unix::fs::symlink(
        outside.path().join("secret"),
        cluster.workspace.path().join("link"),
    )
    .expect("symlink");
    let id = client
        .submit(with_ref("link"))
        .await
        .expect("accepted at submit")
        .into_inner()
        .task_id;
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Error, "{task:?}");
    let error = &task.result.expect("result").errors[0];
    assert!(
        error.message.contains("`link` is outside the workspace"),
        "{error:?}"
    );
    assert_eq!(cluster.model.request_count(), 0);
    cluster.shutdown().await;
}
