//! Tenant isolation on every id a caller can name: two tokens of two tenants, `acme`
//! and `globex`; each path answers `NOT_FOUND` for the other tenant's object, exactly as
//! for a missing one, and leaves the object untouched.

mod worker_requests;

use std::io::Write;

use taskwire_e2e::{Cluster, start_with};
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};
use tonic::transport::Channel;
use tonic::{Code, Request};

const ACME: &str = "acme-secret";
const GLOBEX: &str = "globex-secret";

/// A deployment whose API needs a token; `acme-secret` is tenant `acme`,
/// `globex-secret` tenant `globex`. Commands in `config_dir`, if any.
struct Tenants {
    cluster: Cluster,
    client: TaskServiceClient<Channel>,
    _tokens: tempfile::NamedTempFile,
    _config: tempfile::TempDir,
}

/// The model answers with every user message it was sent (so a leaked history shows),
/// and a `touch` prompt first asks for the command (which `plan` must approve).
fn reveal_history(req: &SeenRequest) -> ScriptedReply {
    let users: Vec<&str> = req
        .messages
        .iter()
        .filter(|m| m.role == "user")
        .map(|m| m.content.as_str())
        .collect();
    if req.assistant_turns() == 0 && users.last().is_some_and(|u| u.contains("touch")) {
        return ScriptedReply::tool_calls([(
            "b1",
            "bash",
            serde_json::json!({"command": "touch approved.txt", "description": "create a file"}),
        )]);
    }
    ScriptedReply::text(format!("seen: {}", users.join(" | ")))
}

async fn tenants() -> Tenants {
    let mut tokens = tempfile::NamedTempFile::new().expect("tokens file");
    writeln!(
        tokens,
        "[[token]]\ntoken = \"{ACME}\"\ntenant = \"acme\"\nscopes = [\"*\"]\n\n\
         [[token]]\ntoken = \"{GLOBEX}\"\ntenant = \"globex\"\nscopes = [\"*\"]\n"
    )
    .expect("write tokens");
    let config = tempfile::tempdir().expect("config dir");
    let commands = config.path().join("commands");
    std::fs::create_dir_all(&commands).expect("mkdir");
    std::fs::write(
        commands.join("recall.md"),
        "---\ndescription: recalls\nagent: build\n---\nrecall $ARGUMENTS\n",
    )
    .expect("write command");
    let (path, dir) = (tokens.path().to_owned(), config.path().to_owned());
    let cluster = start_with(ScriptedModel::start(reveal_history).await, 1, 4, move |c| {
        c.auth_tokens_file = Some(path);
        c.config_dir = Some(dir);
    })
    .await
    .expect("cluster");
    let client = cluster.client().await.expect("client");
    Tenants {
        cluster,
        client,
        _tokens: tokens,
        _config: config,
    }
}

fn as_tenant<T>(token: &str, msg: T) -> Request<T> {
    let mut r = Request::new(msg);
    r.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("ascii"),
    );
    r
}

fn submit(agent: &str, prompt: &str) -> pb::SubmitRequest {
    pb::SubmitRequest {
        agent: agent.into(),
        prompt: prompt.into(),
        ..Default::default()
    }
}

impl Tenants {
    /// Submits as `token`'s tenant and waits until the task is finished.
    async fn finished(&mut self, token: &str, req: pb::SubmitRequest) -> pb::SubmitResponse {
        let r = self
            .client
            .submit(as_tenant(token, req))
            .await
            .expect("submit")
            .into_inner();
        self.get(token, &r.task_id, |t| t.result.is_some()).await;
        r
    }

    /// Submits acme's `plan` task that asks before running a command, and waits until
    /// it is awaiting the approval.
    async fn acme_waiting_on_approval(&mut self) -> pb::SubmitResponse {
        let acme = self
            .client
            .submit(as_tenant(ACME, submit("plan", "touch the file")))
            .await
            .expect("submit")
            .into_inner();
        self.get(ACME, &acme.task_id, |t| {
            t.status() == pb::TaskStatus::AwaitingApproval
        })
        .await;
        acme
    }

    /// Polls `Get` as `token` until `check` holds.
    async fn get(&mut self, token: &str, id: &str, check: impl Fn(&pb::Task) -> bool) -> pb::Task {
        let deadline = tokio::time::Instant::now() + taskwire_e2e::PATIENCE;
        loop {
            let task = self
                .client
                .get(as_tenant(token, pb::GetRequest { task_id: id.into() }))
                .await
                .expect("get")
                .into_inner();
            if check(&task) {
                return task;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "task {id} stuck in {:?}",
                task.status()
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Every model request so far whose messages mention `text`.
    fn model_saw(&self, text: &str) -> usize {
        self.cluster
            .model
            .requests()
            .iter()
            .filter(|r| r.messages.iter().any(|m| m.content.contains(text)))
            .count()
    }

    async fn stop(self) {
        self.cluster.shutdown().await;
    }
}

fn not_found<T: std::fmt::Debug>(r: Result<T, tonic::Status>, what: &str) {
    let err = r.expect_err(what);
    assert_eq!(err.code(), Code::NotFound, "{what}: {err:?}");
}

#[tokio::test]
async fn submit_cannot_resume_a_session_of_another_tenant() {
    let mut t = tenants().await;
    let acme = t
        .finished(ACME, submit("general", "acme secret plan"))
        .await;
    assert_eq!(t.model_saw("acme secret plan"), 1);

    let mut resume = submit("general", "what did we discuss?");
    resume.resume_token = acme.session_id.clone();
    not_found(
        t.client.submit(as_tenant(GLOBEX, resume.clone())).await,
        "globex resumes acme's session",
    );
    let mut unknown = resume.clone();
    unknown.resume_token = taskwire_protocol::SessionId::generate().to_string();
    not_found(
        t.client.submit(as_tenant(GLOBEX, unknown)).await,
        "an unknown session",
    );
    assert_eq!(
        t.model_saw("acme secret plan"),
        1,
        "nothing leaked to a model"
    );

    // The owner still resumes it, with its history.
    t.finished(ACME, resume).await;
    assert_eq!(t.model_saw("acme secret plan"), 2);
    t.stop().await;
}

#[tokio::test]
async fn run_command_cannot_resume_a_session_of_another_tenant() {
    let mut t = tenants().await;
    let acme = t.finished(ACME, submit("build", "acme secret plan")).await;
    let run = pb::RunCommandRequest {
        command: "/recall".into(),
        arguments: "everything".into(),
        session_id: acme.session_id.clone(),
        ..Default::default()
    };
    not_found(
        t.client.run_command(as_tenant(GLOBEX, run.clone())).await,
        "globex runs a command in acme's session",
    );
    assert_eq!(t.model_saw("acme secret plan"), 1);
    let own = t
        .client
        .run_command(as_tenant(ACME, run))
        .await
        .expect("acme runs it in its own session")
        .into_inner();
    t.get(ACME, &own.task_id, |t| t.result.is_some()).await;
    assert_eq!(t.model_saw("acme secret plan"), 2);
    t.stop().await;
}

#[tokio::test]
async fn run_command_cannot_name_a_parent_of_another_tenant() {
    let mut t = tenants().await;
    let acme = t.finished(ACME, submit("build", "acme work")).await;
    let run = pb::RunCommandRequest {
        command: "/recall".into(),
        parent_task_id: acme.task_id.clone(),
        ..Default::default()
    };
    not_found(
        t.client.run_command(as_tenant(GLOBEX, run)).await,
        "globex names acme's task as parent",
    );
    let children = t
        .client
        .list(as_tenant(
            ACME,
            pb::ListRequest {
                parent_task_id: acme.task_id,
                ..Default::default()
            },
        ))
        .await
        .expect("list")
        .into_inner();
    assert!(children.tasks.is_empty(), "{:?}", children.tasks);
    t.stop().await;
}

#[tokio::test]
async fn submit_cannot_name_a_parent_of_another_tenant() {
    let mut t = tenants().await;
    let acme = t.finished(ACME, submit("general", "acme work")).await;
    let mut child = submit("explore", "look around");
    child.parent_task_id = acme.task_id.clone();
    not_found(
        t.client.submit(as_tenant(GLOBEX, child.clone())).await,
        "globex names acme's task as parent",
    );
    child.parent_task_id = taskwire_protocol::TaskId::generate().to_string();
    not_found(
        t.client.submit(as_tenant(ACME, child)).await,
        "an unknown parent",
    );
    t.stop().await;
}

#[tokio::test]
async fn approve_cannot_answer_another_tenants_task_or_request() {
    let mut t = tenants().await;
    let acme = t.acme_waiting_on_approval().await;
    let mut watch = t
        .client
        .watch(as_tenant(
            ACME,
            pb::WatchRequest {
                task_id: acme.task_id.clone(),
            },
        ))
        .await
        .expect("watch")
        .into_inner();
    let request_id = tokio::time::timeout(taskwire_e2e::PATIENCE, async {
        use futures::StreamExt;
        while let Some(ev) = watch.next().await {
            if let Some(pb::watch_event::Event::Progress(p)) = ev.expect("event").event
                && let Some(pb::task_progress::Event::ApprovalRequired(a)) = p.event
            {
                return a.request_id;
            }
        }
        panic!("no approval request")
    })
    .await
    .expect("approval requested in time");
    let globex = t.finished(GLOBEX, submit("general", "globex work")).await;
    let approve = |task_id: &str| pb::ApproveRequest {
        task_id: task_id.into(),
        request_id: request_id.clone(),
        answer: pb::ApprovalAnswer::Once as i32,
        message: String::new(),
    };
    not_found(
        t.client
            .approve(as_tenant(GLOBEX, approve(&acme.task_id)))
            .await,
        "globex answers acme's approval",
    );
    not_found(
        t.client
            .approve(as_tenant(GLOBEX, approve(&globex.task_id)))
            .await,
        "globex answers acme's request through its own task",
    );
    let waiting = t.get(ACME, &acme.task_id, |_| true).await;
    assert_eq!(waiting.status(), pb::TaskStatus::AwaitingApproval);
    let workspace = t
        .cluster
        .task_workspace(&acme.task_id)
        .expect("the task's workspace");
    assert!(!workspace.join("approved.txt").exists());

    t.client
        .approve(as_tenant(ACME, approve(&acme.task_id)))
        .await
        .expect("acme answers its own approval");
    let done = t.get(ACME, &acme.task_id, |t| t.result.is_some()).await;
    assert_eq!(done.status(), pb::TaskStatus::Completed);
    let patch = &done.result.as_ref().expect("result").patch;
    assert!(
        taskwire_e2e::created_in_patch(patch, "approved.txt").is_some(),
        "{patch}"
    );
    t.stop().await;
}

#[tokio::test]
async fn get_and_watch_of_another_tenants_task_are_not_found() {
    let mut t = tenants().await;
    let acme = t.finished(ACME, submit("general", "acme work")).await;
    let id = acme.task_id;
    not_found(
        t.client
            .get(as_tenant(
                GLOBEX,
                pb::GetRequest {
                    task_id: id.clone(),
                },
            ))
            .await,
        "get",
    );
    not_found(
        t.client
            .watch(as_tenant(
                GLOBEX,
                pb::WatchRequest {
                    task_id: id.clone(),
                },
            ))
            .await,
        "watch",
    );
    t.client
        .watch(as_tenant(ACME, pb::WatchRequest { task_id: id }))
        .await
        .expect("the owner watches");
    t.stop().await;
}

#[tokio::test]
async fn cancel_of_another_tenants_task_is_not_found_and_changes_nothing() {
    let mut t = tenants().await;
    let acme = t.acme_waiting_on_approval().await;
    not_found(
        t.client
            .cancel(as_tenant(
                GLOBEX,
                pb::CancelRequest {
                    task_id: acme.task_id.clone(),
                    reason: "mine now".into(),
                },
            ))
            .await,
        "cancel",
    );
    let still = t.get(ACME, &acme.task_id, |_| true).await;
    assert_eq!(still.status(), pb::TaskStatus::AwaitingApproval);
    t.stop().await;
}

#[tokio::test]
async fn replay_of_another_tenants_task_is_not_found() {
    let mut t = tenants().await;
    let acme = t.finished(ACME, submit("general", "acme work")).await;
    let replay = || pb::ReplayRequest {
        task_id: acme.task_id.clone(),
    };
    not_found(t.client.replay(as_tenant(GLOBEX, replay())).await, "replay");
    // The owner is told why it cannot (a completed task is not replayable), not NOT_FOUND.
    let err = t
        .client
        .replay(as_tenant(ACME, replay()))
        .await
        .expect_err("completed");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    t.stop().await;
}

/// A `List` filter naming acme's task is `NOT_FOUND` for globex; acme gets `own` tasks.
async fn list_filter_is_bound_to_the_tenant(
    filter: impl Fn(&pb::SubmitResponse) -> pb::ListRequest,
    own: usize,
) {
    let mut t = tenants().await;
    let acme = t.finished(ACME, submit("general", "acme work")).await;
    not_found(
        t.client.list(as_tenant(GLOBEX, filter(&acme))).await,
        "globex lists by acme's id",
    );
    let listed = t
        .client
        .list(as_tenant(ACME, filter(&acme)))
        .await
        .expect("the owner lists")
        .into_inner();
    assert_eq!(listed.tasks.len(), own);
    t.stop().await;
}

#[tokio::test]
async fn list_by_another_tenants_trace_is_not_found() {
    list_filter_is_bound_to_the_tenant(
        |acme| pb::ListRequest {
            trace_id: acme.trace_id.clone(),
            ..Default::default()
        },
        1,
    )
    .await;
}

#[tokio::test]
async fn list_by_another_tenants_parent_is_not_found() {
    list_filter_is_bound_to_the_tenant(
        |acme| pb::ListRequest {
            parent_task_id: acme.task_id.clone(),
            ..Default::default()
        },
        0,
    )
    .await;
}
