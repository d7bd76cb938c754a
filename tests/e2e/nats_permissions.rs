//! Least privilege on NATS, against a nats-server running the committed
//! `deploy/nats/nats-server.conf` (its users' passwords given through the environment):
//! - the coordinator connected as `coordinator` and a worker as `worker` run a parent
//!   task through an approval and a child, and the server logs no permissions violation;
//! - a worker's credentials are refused for what only coordinators do (dispatching a
//!   task, serving claims or worker requests, cancelling, answering an approval,
//!   deleting, purging or reconfiguring a stream): each is a violation the client is
//!   told about, and none has any effect;
//! - a worker started before any coordinator, whose user may not create streams, waits
//!   for the coordinator's and then serves.

use std::path::{Path, PathBuf};

use async_nats::jetstream;
use futures::StreamExt;
use taskwire_bus::Subjects;
use taskwire_bus::permissions::{COORDINATOR_PASSWORD_ENV, WORKER_PASSWORD_ENV};
use taskwire_e2e::{InProcess, PATIENCE, final_result, progress_events, start_on};
use taskwire_protocol::pb;
use taskwire_test_support::{NatsServer, ScriptedModel, ScriptedReply, SeenRequest};
use tokio::sync::mpsc;

/// A nats-server with the deployment's configuration and fresh passwords, logging to a
/// file the test reads.
struct RoleServer {
    nats: NatsServer,
    log: PathBuf,
    coordinator_password: String,
    worker_password: String,
    _dir: tempfile::TempDir,
}

impl RoleServer {
    fn start() -> Self {
        Self::start_with(&[])
    }

    /// [`RoleServer::start`] with more nats-server flags.
    fn start_with(flags: &[&str]) -> Self {
        let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/nats/nats-server.conf");
        let dir = tempfile::tempdir().expect("log dir");
        let log = dir.path().join("nats-server.log");
        // nats-server parses a variable's value as configuration: a leading letter keeps
        // a hex password from being read as a number.
        let coordinator_password = format!("pw{}", uuid::Uuid::new_v4().simple());
        let worker_password = format!("pw{}", uuid::Uuid::new_v4().simple());
        let nats = NatsServer::start_with_env(
            [
                "-c".as_ref(),
                config.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
            ]
            .into_iter()
            .chain(flags.iter().map(|f| f.as_ref())),
            [
                (COORDINATOR_PASSWORD_ENV, coordinator_password.as_str()),
                (WORKER_PASSWORD_ENV, worker_password.as_str()),
            ],
        )
        .unwrap_or_else(|e| {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("nats-server with the deployment's configuration: {e:#}\n{log}")
        });
        Self {
            nats,
            log,
            coordinator_password,
            worker_password,
            _dir: dir,
        }
    }

    /// The URL taskwire's `--nats-url` takes: `nats://USER:PASSWORD@HOST:PORT`.
    fn url(&self, user: &str, password: &str) -> String {
        format!("nats://{user}:{password}@127.0.0.1:{}", self.nats.port())
    }

    fn coordinator_url(&self) -> String {
        self.url("coordinator", &self.coordinator_password)
    }

    fn worker_url(&self) -> String {
        self.url("worker", &self.worker_password)
    }

    /// Connects as `user` with `password`.
    async fn connect(
        &self,
        user: &str,
        password: &str,
        options: async_nats::ConnectOptions,
    ) -> Result<async_nats::Client, async_nats::ConnectError> {
        options
            .user_and_password(user.to_owned(), password.to_owned())
            .connection_timeout(PATIENCE)
            .connect(self.nats.url())
            .await
    }
}

/// The permissions violations a nats-server has written to its log `log`.
fn server_violations(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .expect("nats-server log")
        .lines()
        .filter(|l| l.contains("Violation"))
        .map(str::to_owned)
        .collect()
}

/// The model: the `plan` parent asks before its command, then delegates to an `explore`
/// child that reads a file (so the parent's worker follows the child's progress), then
/// reports what the child read.
fn parent_asks_then_delegates(req: &SeenRequest) -> ScriptedReply {
    let last_tool = || {
        req.messages
            .iter()
            .rev()
            .find(|m| m.role == "tool")
            .map(|m| m.content.clone())
            .unwrap_or_default()
    };
    if req.first_user_message() == Some("child: read notes.txt") {
        return match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([(
                "r1",
                "read",
                serde_json::json!({ "filePath": "notes.txt" }),
            )]),
            _ => ScriptedReply::text(format!("child read: {}", last_tool())),
        };
    }
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([(
            "b1",
            "bash",
            serde_json::json!({"command": "touch approved.txt", "description": "create a file"}),
        )]),
        1 => ScriptedReply::tool_calls([(
            "t1",
            "task",
            serde_json::json!({"description": "read the notes", "prompt": "child: read notes.txt", "subagent_type": "explore"}),
        )]),
        _ => ScriptedReply::text(format!("parent done: {}", last_tool())),
    }
}

#[tokio::test]
async fn a_task_tree_runs_with_the_coordinator_and_worker_users_and_no_violation() {
    let server = RoleServer::start();
    let coordinator_url = server.coordinator_url();
    let worker_url = server.worker_url();
    let mut cluster = start_on(
        server.nats,
        ScriptedModel::start(parent_asks_then_delegates).await,
        |c| c.nats_url = coordinator_url,
    )
    .await
    .expect("coordinator connected as `coordinator`");
    // The parent holds one session while its child runs in the other.
    cluster.add_worker_with("w", 2, |c| c.nats_url = worker_url.clone());
    std::fs::write(
        cluster.workspace.path().join("notes.txt"),
        "the gamma notes\n",
    )
    .expect("write notes");

    let mut client = cluster.client().await.expect("client");
    let parent = cluster
        .submit("plan", "make the file, then read the notes")
        .await
        .expect("submit");
    let mut watch = client
        .watch(pb::WatchRequest {
            task_id: parent.clone(),
        })
        .await
        .expect("watch")
        .into_inner();
    let mut events = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        while let Some(event) = watch.next().await {
            let event = event.expect("watch event");
            if let Some(pb::watch_event::Event::Progress(p)) = &event.event
                && let Some(pb::task_progress::Event::ApprovalRequired(a)) = &p.event
            {
                // The decision reaches the worker on the approval subject.
                client
                    .approve(pb::ApproveRequest {
                        task_id: parent.clone(),
                        request_id: a.request_id.clone(),
                        answer: pb::ApprovalAnswer::Once as i32,
                        message: String::new(),
                    })
                    .await
                    .expect("approve");
            }
            events.push(event);
        }
    })
    .await
    .expect("the watch ended in time");

    let result = final_result(&events).expect("result");
    assert_eq!(result.status(), pb::TaskStatus::Completed, "{result:?}");
    let text = &result.output.as_ref().expect("output").text;
    assert!(
        text.contains("parent done: child read:") && text.contains("the gamma notes"),
        "{text}"
    );
    assert!(
        taskwire_e2e::created_in_patch(&result.patch, "approved.txt").is_some(),
        "the approved command ran: {}",
        result.patch
    );
    let children = cluster.children(&parent).await.expect("children");
    assert_eq!(children.len(), 1, "{children:?}");
    assert_eq!(children[0].status(), pb::TaskStatus::Completed);
    // The worker followed the child's progress from the events stream into the parent's.
    let child_task = children[0].task_id.clone();
    assert!(
        progress_events(&events).iter().any(|p| matches!(
            &p.event,
            Some(pb::task_progress::Event::ToolCall(t)) if t.task_id == child_task && t.tool == "read"
        )),
        "the child's read never reached the parent's progress"
    );

    cluster.shutdown().await;
    assert_eq!(
        server_violations(&server.log),
        Vec::<String>::new(),
        "the roles needed a subject their permissions do not allow"
    );
}

/// Options whose client reports server errors (permissions violations among them) in
/// order on the returned channel.
fn watching_errors() -> (async_nats::ConnectOptions, mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let options = async_nats::ConnectOptions::new().event_callback(move |event| {
        let tx = tx.clone();
        async move {
            if let async_nats::Event::ServerError(e) = event {
                let _ = tx.send(e.to_string());
            }
        }
    });
    (options, rx)
}

/// Asserts that the next error the server sent this connection is the violation
/// `violation`.
async fn refused(errors: &mut mpsc::UnboundedReceiver<String>, violation: &str) {
    let error = tokio::time::timeout(PATIENCE, errors.recv())
        .await
        .unwrap_or_else(|_| panic!("the server never refused: {violation}"))
        .expect("the connection's events end only with the client");
    assert!(
        error.contains(&format!("Permissions Violation for {violation}")),
        "expected a violation for {violation}, got {error}"
    );
}

#[tokio::test]
async fn a_worker_cannot_dispatch_serve_cancel_approve_or_manage_streams() {
    let server = RoleServer::start();
    let s = Subjects::default();

    // No user, or the worker's password for the coordinator user: refused.
    let anonymous = async_nats::ConnectOptions::new()
        .connection_timeout(PATIENCE)
        .connect(server.nats.url())
        .await;
    assert!(anonymous.is_err(), "a client without a user was let in");
    let posing = server
        .connect(
            "coordinator",
            &server.worker_password,
            async_nats::ConnectOptions::new(),
        )
        .await;
    assert!(
        posing.is_err(),
        "the worker's password opened the coordinator user"
    );

    // As in a deployment: the coordinator user makes the streams and queues one task.
    let coordinator = server
        .connect(
            "coordinator",
            &server.coordinator_password,
            async_nats::ConnectOptions::new(),
        )
        .await
        .expect("coordinator connects");
    let js = jetstream::new(coordinator.clone());
    taskwire_bus::ensure_streams(&js, &taskwire_bus::BusConfig::default())
        .await
        .expect("the coordinator user manages the streams");
    js.publish(s.tasks("default"), "queued".into())
        .await
        .expect("publish the task")
        .await
        .expect("task stored");

    let (options, mut errors) = watching_errors();
    let worker = server
        .connect("worker", &server.worker_password, options)
        .await
        .expect("worker connects");
    // Another worker, hearing cancel notices and approval decisions as workers do.
    let listener = server
        .connect(
            "worker",
            &server.worker_password,
            async_nats::ConnectOptions::new(),
        )
        .await
        .expect("listener connects");
    let mut cancels = listener.subscribe(s.cancel_all()).await.expect("subscribe");
    let mut approvals = listener
        .subscribe(s.approval_all())
        .await
        .expect("subscribe");
    listener.flush().await.expect("subscriptions registered");

    // Dispatching a task, cancelling a task, answering its approval.
    let task = taskwire_protocol::TaskId::generate();
    for subject in [s.tasks("default"), s.cancel(task), s.approval(task)] {
        worker
            .publish(subject.clone(), "forged".into())
            .await
            .expect("sent");
        worker.flush().await.expect("flushed");
        refused(&mut errors, &format!("Publish to \"{subject}\"")).await;
    }
    // Serving claims and worker requests in the coordinators' queue group.
    let group = taskwire_bus::subjects::COORDINATORS_GROUP;
    let mut responders = Vec::new();
    for subject in [s.claim(), s.rpc_all()] {
        responders.push(
            worker
                .queue_subscribe(subject.clone(), group.to_owned())
                .await
                .expect("sent"),
        );
        worker.flush().await.expect("flushed");
        refused(
            &mut errors,
            &format!("Subscription to \"{subject}\" using queue \"{group}\""),
        )
        .await;
    }
    // Deleting, purging or reconfiguring the tasks stream.
    for call in ["DELETE", "PURGE", "UPDATE"] {
        let subject = format!("$JS.API.STREAM.{call}.{}", s.tasks_stream());
        worker
            .publish_with_reply(subject.clone(), worker.new_inbox(), "{}".into())
            .await
            .expect("sent");
        worker.flush().await.expect("flushed");
        refused(&mut errors, &format!("Publish to \"{subject}\"")).await;
    }

    // None of it had an effect. The tasks stream holds the coordinator's task and never
    // stored another.
    let info = js
        .get_stream(s.tasks_stream())
        .await
        .expect("the tasks stream still exists")
        .info()
        .await
        .expect("stream info")
        .clone();
    assert_eq!(
        (info.state.messages, info.state.last_sequence),
        (1, 1),
        "{info:?}"
    );
    // Nobody answers claims or worker requests: the refused subscriptions serve nothing.
    for subject in [s.claim(), s.rpc("task")] {
        let err = worker
            .request(subject.clone(), "{}".into())
            .await
            .expect_err("no coordinator runs");
        assert_eq!(
            err.kind(),
            async_nats::client::RequestErrorKind::NoResponders,
            "{subject}: {err}"
        );
    }
    // Workers hear the coordinator's cancel notice and decision, and nothing before it.
    coordinator
        .publish(s.cancel(task), "real".into())
        .await
        .expect("cancel");
    coordinator
        .publish(s.approval(task), "real".into())
        .await
        .expect("decision");
    for subscription in [&mut cancels, &mut approvals] {
        let first = tokio::time::timeout(PATIENCE, subscription.next())
            .await
            .expect("a message in time")
            .expect("subscribed");
        assert_eq!(first.payload, "real", "{}", first.subject);
    }
    // The worker stayed connected and was refused nothing else.
    assert_eq!(errors.try_recv().ok(), None);
    assert_eq!(
        worker.connection_state(),
        async_nats::connection::State::Connected
    );
    drop(responders);

    let logged = server_violations(&server.log);
    assert_eq!(logged.len(), 8, "{logged:#?}");
    assert!(
        logged.iter().all(|l| l.contains("\"worker\"")),
        "{logged:#?}"
    );
}

#[tokio::test]
async fn a_worker_started_before_the_coordinator_waits_for_its_streams() {
    taskwire_test_support::init_tracing();
    // The worker builds its model client before the harness would install this.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Traced, so that the log shows the worker's first look for the tasks stream.
    let server = RoleServer::start_with(&["-V"]);
    let model = ScriptedModel::echo().await;
    let workspace = tempfile::tempdir().expect("workspace");
    let mut config = taskwire_worker::WorkerConfig {
        nats_url: server.worker_url(),
        worker_id: Some("early-worker".to_owned()),
        workspace: workspace.path().to_owned(),
        workspaces_dir: workspace.path().with_extension("workspaces"),
        ..Default::default()
    };
    config.model.base_url = model.base_url();
    config.model.default_model = "scripted".to_owned();
    let worker = InProcess::worker(config);

    let looked = format!(
        ":rust:early-worker\" - <<- [PUB $JS.API.STREAM.INFO.{} ",
        Subjects::default().tasks_stream()
    );
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !std::fs::read_to_string(&server.log)
        .unwrap_or_default()
        .contains(&looked)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker never looked for the tasks stream"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let coordinator_url = server.coordinator_url();
    let cluster = start_on(server.nats, model, |c| c.nats_url = coordinator_url)
        .await
        .expect("coordinator");
    let id = cluster.submit("general", "early").await.expect("submit");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed);
    let result = task.result.expect("result");
    assert_eq!(result.worker_id, "early-worker");
    assert_eq!(
        result.output.map(|o| o.text).as_deref(),
        Some("echo: early")
    );

    worker.stop().await;
    cluster.shutdown().await;
    assert_eq!(server_violations(&server.log), Vec::<String>::new());
}

#[tokio::test]
async fn a_worker_may_put_and_get_patches_but_not_delete_or_purge_the_patch_bucket() {
    let server = RoleServer::start();
    let s = Subjects::default();
    let coordinator = server
        .connect(
            "coordinator",
            &server.coordinator_password,
            async_nats::ConnectOptions::new(),
        )
        .await
        .expect("coordinator connects");
    let js = jetstream::new(coordinator);
    taskwire_bus::ensure_streams(&js, &taskwire_bus::BusConfig::default())
        .await
        .expect("the coordinator user makes the streams and the patch bucket");

    let (options, mut errors) = watching_errors();
    let worker = server
        .connect("worker", &server.worker_password, options)
        .await
        .expect("worker connects");
    // Several chunks, read back through a flow-controlled consumer.
    let patch: String = (0..100_000).map(|i| format!("+line {i}\n")).collect();
    let patches = taskwire_bus::Patches::new(jetstream::new(worker.clone()), &s);
    let reference = patches
        .put("result", "t1", &patch)
        .await
        .expect("a worker puts a patch");
    assert_eq!(
        patches.get(&reference).await.expect("a worker reads it"),
        patch
    );
    // The coordinator reads what a worker put.
    let read = taskwire_bus::Patches::new(js.clone(), &s)
        .get(&reference)
        .await
        .expect("the coordinator reads it");
    assert_eq!(read.len(), patch.len());

    for call in ["DELETE", "PURGE", "UPDATE"] {
        let subject = format!("$JS.API.STREAM.{call}.{}", s.patches_stream());
        worker
            .publish_with_reply(subject.clone(), worker.new_inbox(), "{}".into())
            .await
            .expect("sent");
        worker.flush().await.expect("flushed");
        refused(&mut errors, &format!("Publish to \"{subject}\"")).await;
    }
    assert_eq!(
        patches.get(&reference).await.expect("still there"),
        patch,
        "the bucket and its object survived"
    );
    assert_eq!(errors.try_recv().ok(), None, "nothing else was refused");
    let logged = server_violations(&server.log);
    assert_eq!(logged.len(), 3, "{logged:#?}");
}
