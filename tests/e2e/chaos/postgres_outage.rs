//! Postgres stopped for a few seconds: `Submit` answers `UNAVAILABLE` (not `INTERNAL`,
//! not a hang) while it is down, works again once it is back, and the tasks accepted
//! before the outage, some of them mid-session when it began, all complete.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use taskwire_e2e::{InProcess, PATIENCE};
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;
use taskwire_test_support::{NatsServer, PrivatePostgres, ScriptedModel};

use super::{echo_of, prompts_seen, slow_echo, task, wait_finished};

const BEFORE: usize = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn submit_is_unavailable_while_postgres_is_down_and_nothing_accepted_before_is_lost() {
    taskwire_test_support::init_tracing();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut pg = tokio::task::block_in_place(PrivatePostgres::start).expect("private postgres");
    let nats = NatsServer::start().expect("nats");
    // Slow enough that sessions are still running when the database goes away.
    let model = slow_echo(Duration::from_millis(400)).await;
    let workspace = tempfile::tempdir().expect("workspace");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let coordinator = InProcess::coordinator(
        taskwire_coordinator::CoordinatorConfig {
            database_url: pg.url(),
            nats_url: nats.url(),
            listen: addr,
            http_listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            ack_wait: Duration::from_secs(10),
            ..Default::default()
        },
        listener,
    );
    let worker = start_worker(&nats, &model, workspace.path(), |config| {
        config.concurrency = 4;
        config.drain_grace = Duration::from_secs(2);
    });
    let mut client = connect(addr).await;

    let mut accepted = Vec::new();
    for i in 0..BEFORE {
        let prompt = format!("before the outage {i}");
        accepted.push((
            client
                .submit(task(&prompt))
                .await
                .expect("submit")
                .into_inner()
                .task_id,
            prompt,
        ));
    }
    // Stop only once a session is under way, so a result arrives during the outage.
    super::eventually("a session to start", || {
        Ok((model.request_count() > 0).then_some(()))
    })
    .await
    .expect("sessions under way");

    tokio::task::block_in_place(|| pg.stop()).expect("stop postgres");
    let stopped = Instant::now();
    let mut answers: BTreeMap<String, usize> = BTreeMap::new();
    let mut refused_prompts = Vec::new();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let prompt = format!("during the outage {}", refused_prompts.len());
        let r = tokio::time::timeout(Duration::from_secs(15), client.submit(task(&prompt))).await;
        let code = match r {
            Ok(Ok(_)) => panic!("a submit was accepted while postgres was down"),
            Ok(Err(status)) => status.code(),
            Err(_) => panic!("a submit hung while postgres was down"),
        };
        *answers.entry(format!("{code:?}")).or_default() += 1;
        refused_prompts.push(prompt);
        if code == tonic::Code::Unavailable {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never UNAVAILABLE: {answers:?}"
        );
    }
    let first_unavailable = stopped.elapsed();
    assert_eq!(
        answers.len(),
        1,
        "every refusal is UNAVAILABLE: {answers:?}"
    );

    tokio::task::block_in_place(|| pg.start_again()).expect("start postgres again");
    let restarted = Instant::now();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let after = loop {
        match client.submit(task("after the outage")).await {
            Ok(r) => break r.into_inner().task_id,
            Err(status) => assert!(
                tokio::time::Instant::now() < deadline,
                "submit never recovered: {status}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let submit_recovered = restarted.elapsed();
    accepted.push((after, "after the outage".to_owned()));

    for (id, prompt) in &accepted {
        let task = wait_finished(&mut client, id)
            .await
            .unwrap_or_else(|e| panic!("{prompt}: {e}"));
        assert_eq!(task.status(), pb::TaskStatus::Completed, "{prompt}");
        assert_eq!(
            task.result.expect("result").output.expect("output").text,
            echo_of(prompt)
        );
    }
    let all_done = restarted.elapsed();
    let seen = prompts_seen(&model);
    for prompt in &refused_prompts {
        assert!(!seen.contains_key(prompt), "a refused submit ran: {prompt}");
    }
    eprintln!(
        "postgres stopped: first UNAVAILABLE {first_unavailable:?} after the stop ({answers:?}); \
         after the restart submit worked in {submit_recovered:?} and all {} accepted tasks completed in {all_done:?}",
        accepted.len()
    );
    worker.stop().await;
    coordinator.stop().await;
}

/// A worker named `worker` in this process, serving `model` (as `scripted`) through
/// `nats`, its configuration adjusted by `configure`.
fn start_worker(
    nats: &NatsServer,
    model: &ScriptedModel,
    workspace: &Path,
    configure: impl FnOnce(&mut taskwire_worker::WorkerConfig),
) -> InProcess {
    let mut config = taskwire_worker::WorkerConfig {
        nats_url: nats.url(),
        workspace: workspace.to_owned(),
        // Its own task workspaces: another test's worker of the same name must not
        // share (and clean up) them.
        workspaces_dir: workspace.with_extension("workspaces"),
        worker_id: Some("worker".to_owned()),
        ack_wait: Duration::from_secs(10),
        ..Default::default()
    };
    config.model.base_url = model.base_url();
    config.model.default_model = "scripted".to_owned();
    configure(&mut config);
    InProcess::worker(config)
}

async fn connect(addr: std::net::SocketAddr) -> TaskServiceClient<tonic::transport::Channel> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Ok(mut c) = TaskServiceClient::connect(format!("http://{addr}")).await
            && c.list_agents(pb::ListAgentsRequest::default())
                .await
                .is_ok()
        {
            return c;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "coordinator did not serve"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The coordinator's database goes away between a claim and the session's transcript
/// load: the load is answered `Unavailable`. That is no reason to fail the task: the
/// worker must offer it again (a new claim), and publish no final result meanwhile.
/// The test plays the coordinator over NATS, so the moment is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcript_load_refused_while_the_database_is_down_is_retried_not_failed() {
    use futures::StreamExt;
    use prost::Message as _;

    taskwire_test_support::init_tracing();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let nats = NatsServer::start().expect("nats");
    let model = slow_echo(Duration::ZERO).await;
    let workspace = tempfile::tempdir().expect("workspace");
    let client = async_nats::connect(nats.url()).await.expect("nats client");
    let subjects = taskwire_bus::Subjects::default();
    let mut claims = client.subscribe(subjects.claim()).await.expect("claims");
    let mut loads = client
        .subscribe(subjects.rpc("session.load"))
        .await
        .expect("loads");
    let mut results = client
        .subscribe(subjects.results_all())
        .await
        .expect("results");

    // The streams are the coordinator's to create (workers wait for them); this test
    // stands in for the coordinator.
    let js = async_nats::jetstream::new(client.clone());
    taskwire_bus::ensure_streams(&js, &taskwire_bus::BusConfig::default())
        .await
        .expect("streams");
    let worker = start_worker(&nats, &model, workspace.path(), |config| {
        config.concurrency = 1;
        config.drain_grace = Duration::from_secs(1);
    });

    let mut new = taskwire_coordinator::submit::build_task(
        &taskwire_coordinator::CoordinatorConfig::default(),
        &taskwire_coordinator::agents::Agents::from(
            taskwire_definitions::builtin::AgentRegistry::builtin(),
        ),
        &subjects,
        // Resuming a session: its transcript is loaded before the session starts.
        pb::SubmitRequest {
            resume_token: taskwire_protocol::SessionId::generate().to_string(),
            ..task("load my transcript")
        },
        None,
        taskwire_coordinator::submit::Origin::Request,
        taskwire_coordinator::submit::SubmitTrace::default(),
    )
    .expect("a valid task");
    // A resumed session: the worker has a transcript to load.
    new.request.new_session = false;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let payload = pb::TaskRequest::from(&new.request).encode_to_vec();
    loop {
        if let Ok(ack) = js
            .publish(new.subject.clone(), payload.clone().into())
            .await
            && ack.await.is_ok()
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "tasks stream never appeared"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let claim = next_message(&mut claims, "a claim").await;
    let granted = pb::ClaimReply {
        verdict: pb::claim_reply::Verdict::Granted as i32,
        claim_epoch: 1,
        attempt: 1,
        last_attempt: false,
        ..Default::default()
    };
    answer(&client, claim, &granted).await;
    let load = next_message(&mut loads, "a transcript load").await;
    let unavailable = pb::SessionLoadReply {
        status: Some(pb::RpcStatus {
            code: taskwire_protocol::ErrorCode::Unavailable
                .as_wire()
                .to_owned(),
            message: "failed to read a session: database unavailable".to_owned(),
        }),
        ..Default::default()
    };
    answer(&client, load, &unavailable).await;

    // Offered again: a second claim of the same task.
    let again = next_message(&mut claims, "the task offered again").await;
    let again = pb::ClaimRequest::decode(again.payload.as_ref()).expect("a claim request");
    assert_eq!(again.task_id, new.request.task_id.to_string());
    // Any result published for the refused attempt schedules a retry; none is final.
    while let Ok(Some(r)) = tokio::time::timeout(Duration::from_millis(100), results.next()).await {
        let r = pb::TaskResult::decode(r.payload.as_ref()).expect("a task result");
        assert!(
            r.retry_scheduled,
            "a transient load failure ended the task: {r:?}"
        );
    }
    assert_eq!(model.request_count(), 0, "no session ran");
    worker.stop().await;
}

/// The next message on `subscriber`, within [`PATIENCE`].
async fn next_message(subscriber: &mut async_nats::Subscriber, what: &str) -> async_nats::Message {
    use futures::StreamExt;
    tokio::time::timeout(PATIENCE, subscriber.next())
        .await
        .unwrap_or_else(|_| panic!("no {what} within {PATIENCE:?}"))
        .unwrap_or_else(|| panic!("the subscription ended before {what}"))
}

/// Answers the request `message` with `reply`.
async fn answer(
    client: &async_nats::Client,
    message: async_nats::Message,
    reply: &impl prost::Message,
) {
    let subject = message.reply.expect("a reply subject");
    client
        .publish(subject, reply.encode_to_vec().into())
        .await
        .expect("answer");
}

/// The twin with a task tree of the store's held-connection tests: every connection the
/// coordinator has to its database is ended while both children run (its batch loops
/// keep theirs between statements); the loops take new ones, and the tree completes
/// once, with its two children, each run once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_tree_completes_once_when_the_coordinators_database_connections_are_cut_under_it() {
    use super::coordinator_crash::Deployment;
    use super::two_coordinators::{CHILDREN, PARENT, assert_tree_completed_once, tree_script};

    let deployment = Deployment::with_model(ScriptedModel::start(tree_script).await).await;
    let (mut coordinator, mut client) = deployment.coordinator("coordinator-1").await;
    let mut worker = deployment.worker(4);
    let parent = client
        .submit(task(PARENT))
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    super::eventually("both children to run", || {
        coordinator.check_running()?;
        let seen = prompts_seen(&deployment.model);
        Ok(CHILDREN.iter().all(|c| seen.contains_key(*c)).then_some(()))
    })
    .await
    .expect("children running");
    let cut = deployment
        .database()
        .terminate_connections()
        .await
        .expect("connections ended");
    assert!(cut > 0, "the coordinator had no connection to end");

    let done = wait_finished(&mut client, &parent)
        .await
        .unwrap_or_else(|e| panic!("{e}\ncoordinator log:\n{}", coordinator.tail(20)));
    let (_, child_runs) = assert_tree_completed_once(&done, &mut client, &deployment.model).await;
    eprintln!("connections cut under a tree: {cut} ended, child runs {child_runs:?}");
    coordinator
        .check_running()
        .expect("the coordinator kept serving");
    worker.check_running().expect("the worker kept running");
}
