//! The typed bus against a real nats-server: a coordinator-side handler served by
//! [`taskwire_bus::serve`], called through [`taskwire_bus::Bus`]'s typed requests.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use prost::Message as _;
use taskwire_bus::claims::Claimer;
use taskwire_bus::messages::{
    AgentSpecLookup, Answer, ApprovalAsk, ApprovalDecision, ChildSubmit, ChildSubmitted, Claim,
    ClaimRequest, ClaimVerdict, SessionLoad, SessionSave, StoredSession, TaskLookup, TaskState,
};
use taskwire_bus::{AgentSpecs, Bus, Method, RpcError, Subjects, WorkerRequests};
use taskwire_protocol::{
    AgentSpecBundle, AgentSpecDigest, ClaimEpoch, ErrorCode, SessionId, TaskId, TaskStatus,
    WorkerId, pb,
};
use taskwire_test_support::NatsServer;
use tokio_util::sync::CancellationToken;

/// A coordinator with fixed answers: every session has a transcript saved by its
/// task; tasks are running; claims are granted at epoch 7; children are refused; it
/// knows one agent spec ([`known_spec`]) and answers another for [`lying_digest`].
#[derive(Default)]
struct Fixed {
    served: AtomicUsize,
    spec_lookups: AtomicUsize,
    /// The size of each batch of claims the handler was given.
    claim_batches: std::sync::Mutex<Vec<usize>>,
}

fn known_spec() -> AgentSpecBundle {
    AgentSpecBundle {
        spec: Arc::new(pb::AgentSpec {
            name: "general".into(),
            prompt: "You are a general agent. ".repeat(40),
            ..Default::default()
        }),
        subagents: Arc::from([("explore".to_owned(), "Reads code.".to_owned())]),
    }
}

/// A digest the fixed coordinator answers with a bundle other than the one it names.
fn lying_digest() -> AgentSpecDigest {
    AgentSpecDigest::of(&known_spec().spec, &[])
}

/// A dispatched request for the agent `general` naming its spec by `digest`.
fn dispatched(digest: &[u8]) -> Vec<u8> {
    pb::TaskRequest {
        task_id: TaskId::generate().to_string(),
        trace_id: taskwire_protocol::TraceId::generate().to_string(),
        agent: "general".into(),
        prompt: "do it".into(),
        created_at: Some(Default::default()),
        agent_spec_digest: digest.to_vec(),
        ..Default::default()
    }
    .encode_to_vec()
}

#[async_trait]
impl WorkerRequests for Fixed {
    async fn claim(
        &self,
        claims: Vec<ClaimRequest>,
    ) -> Vec<Option<Result<ClaimVerdict, RpcError>>> {
        self.served.fetch_add(claims.len(), Ordering::SeqCst);
        self.claim_batches
            .lock()
            .expect("not poisoned")
            .push(claims.len());
        claims
            .iter()
            .map(|c| {
                Some(Ok(ClaimVerdict::Granted(Claim {
                    epoch: ClaimEpoch(7),
                    attempt: u32::try_from(c.delivery).unwrap_or_default(),
                    last_attempt: false,
                })))
            })
            .collect()
    }
    async fn child_submit(&self, submit: ChildSubmit) -> Result<ChildSubmitted, RpcError> {
        self.served.fetch_add(1, Ordering::SeqCst);
        Err(RpcError::new(
            ErrorCode::NotFound,
            format!("agent `{}` not found", submit.request.agent),
        ))
    }
    async fn task_lookup(&self, lookup: TaskLookup) -> Result<TaskState, RpcError> {
        self.served.fetch_add(1, Ordering::SeqCst);
        Ok(TaskState {
            task: lookup.task,
            status: TaskStatus::Running,
            result: None,
        })
    }
    async fn agent_spec(&self, lookup: AgentSpecLookup) -> Result<AgentSpecBundle, RpcError> {
        self.spec_lookups.fetch_add(1, Ordering::SeqCst);
        // Slow enough that requests arriving together overlap.
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The lying digest is answered with the known bundle, which it does not name.
        if lookup.digest == known_spec().digest() || lookup.digest == lying_digest() {
            Ok(known_spec())
        } else {
            Err(RpcError::new(
                ErrorCode::NotFound,
                format!("agent spec {}", lookup.digest),
            ))
        }
    }
    async fn session_load(&self, load: SessionLoad) -> Result<Option<StoredSession>, RpcError> {
        self.served.fetch_add(1, Ordering::SeqCst);
        Ok(Some(StoredSession {
            transcript_json: br#"{"messages":[]}"#.to_vec(),
            saved_by: load.task,
        }))
    }
    async fn session_save(&self, _: SessionSave) -> Result<(), RpcError> {
        Err(RpcError::new(ErrorCode::Internal, "the disk is on fire"))
    }
    async fn approval_ask(&self, _: ApprovalAsk) -> Result<(), RpcError> {
        Ok(())
    }
    async fn approval_check(
        &self,
        task: TaskId,
        request_id: String,
    ) -> Result<Option<ApprovalDecision>, RpcError> {
        Ok(Some(ApprovalDecision {
            task,
            request_id,
            answer: Answer::Always,
            message: None,
        }))
    }
    async fn approval_timeout(
        &self,
        _: TaskId,
        _: String,
    ) -> Result<Option<ApprovalDecision>, RpcError> {
        Ok(None)
    }
}

struct Served {
    _nats: NatsServer,
    bus: Bus,
    handler: Arc<Fixed>,
    stop: CancellationToken,
    server: tokio::task::JoinHandle<()>,
}

async fn served() -> Served {
    let nats = NatsServer::start().expect("nats-server starts (apt-get install nats-server)");
    let client = async_nats::connect(nats.url()).await.expect("connects");
    let bus = Bus::new(client, Subjects::new("bustest"));
    let handler = Arc::new(Fixed::default());
    let stop = CancellationToken::new();
    let server = tokio::spawn({
        let (bus, handler, stop) = (bus.clone(), handler.clone(), stop.clone());
        async move {
            taskwire_bus::serve(bus, handler, stop)
                .await
                .expect("subscribes");
        }
    });
    // Served once a typed call is answered.
    let deadline = Instant::now() + Duration::from_secs(10);
    while bus
        .task_lookup(TaskId::generate(), TaskId::generate())
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the server never answered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Served {
        _nats: nats,
        bus,
        handler,
        stop,
        server,
    }
}

impl Served {
    async fn stop(self) {
        self.stop.cancel();
        self.server.await.expect("the server stops");
    }
}

#[tokio::test]
async fn typed_calls_return_domain_values_and_refusals_keep_their_code() {
    let s = served().await;
    let (task, session) = (TaskId::generate(), SessionId::generate());

    let loaded = s.bus.session_load(session, task).await.expect("loads");
    assert_eq!(loaded.expect("a saved session").saved_by, task);

    let state = s
        .bus
        .task_lookup(task, TaskId::generate())
        .await
        .expect("found");
    assert_eq!((state.task, state.status), (task, TaskStatus::Running));

    let verdict = s
        .bus
        .claim(&ClaimRequest {
            task,
            worker: WorkerId::new("w1"),
            delivery: 2,
        })
        .await
        .expect("answered");
    assert_eq!(
        verdict,
        ClaimVerdict::Granted(Claim {
            epoch: ClaimEpoch(7),
            attempt: 2,
            last_attempt: false
        })
    );

    let decision = s.bus.approval_check(task, "r1").await.expect("answered");
    assert_eq!(
        decision.map(|d| (d.task, d.answer)),
        Some((task, Answer::Always))
    );
    assert_eq!(s.bus.approval_timeout(task, "r1").await, Ok(None));

    let refused = s
        .bus
        .child_submit(&ChildSubmit {
            parent: task,
            parent_epoch: ClaimEpoch(7),
            parent_model: None,
            request: pb::SubmitRequest {
                agent: "nobody".into(),
                idempotency_key: "child:x:1".into(),
                ..Default::default()
            },
            traceparent: String::new(),
            fork: None,
        })
        .await
        .expect_err("refused");
    assert_eq!(refused.code(), ErrorCode::NotFound);
    assert_eq!(refused.message, "agent `nobody` not found");

    // An internal failure reaches the worker as INTERNAL, not as an outage.
    let failed = s
        .bus
        .session_save(&SessionSave {
            session,
            task,
            epoch: ClaimEpoch(7),
            transcript_json: b"{}".to_vec(),
        })
        .await
        .expect_err("refused");
    assert_eq!(failed.code(), ErrorCode::Internal);
    assert!(!failed.is_retryable());
    s.stop().await;
}

#[tokio::test]
async fn requests_arriving_together_fetch_their_spec_once_and_share_it() {
    let s = served().await;
    let specs = AgentSpecs::new(s.bus.clone());
    let digest = known_spec().digest();
    let messages: Vec<Vec<u8>> = (0..20).map(|_| dispatched(digest.as_bytes())).collect();
    let decoded = futures::future::join_all(messages.iter().map(|m| specs.decode_request(m))).await;
    let requests: Vec<_> = decoded
        .into_iter()
        .map(|r| r.expect("a request with its spec"))
        .collect();
    assert_eq!(s.handler.spec_lookups.load(Ordering::SeqCst), 1);
    assert_eq!(requests[0].spec_bundle(), known_spec());
    for r in &requests {
        assert!(
            Arc::ptr_eq(&r.agent_spec, &requests[0].agent_spec),
            "one copy"
        );
        assert!(
            Arc::ptr_eq(&r.subagents, &requests[0].subagents),
            "one copy"
        );
    }
    // Later requests come from the cache.
    specs
        .decode_request(&dispatched(digest.as_bytes()))
        .await
        .expect("cached");
    assert_eq!(s.handler.spec_lookups.load(Ordering::SeqCst), 1);
    assert_eq!(specs.cached(), 1);
    s.stop().await;
}

#[tokio::test]
async fn a_spec_unknown_or_not_the_one_named_is_refused_and_not_kept() {
    let s = served().await;
    let specs = AgentSpecs::new(s.bus.clone());

    let unknown = AgentSpecDigest::of(&pb::AgentSpec::default(), &[]);
    let err = specs
        .decode_request(&dispatched(unknown.as_bytes()))
        .await
        .expect_err("unknown");
    assert_eq!(err.code(), ErrorCode::NotFound, "{err}");
    assert!(err.to_string().contains(&unknown.to_string()), "{err}");

    // A spec whose digest differs from the one asked for is never run.
    let err = specs
        .decode_request(&dispatched(lying_digest().as_bytes()))
        .await
        .expect_err("the wrong spec");
    assert_eq!(err.code(), ErrorCode::Internal, "{err}");

    // A failed lookup is asked again next time.
    let before = s.handler.spec_lookups.load(Ordering::SeqCst);
    specs
        .decode_request(&dispatched(unknown.as_bytes()))
        .await
        .expect_err("still unknown");
    assert_eq!(s.handler.spec_lookups.load(Ordering::SeqCst), before + 1);
    assert_eq!(specs.cached(), 0, "failed lookups keep nothing");

    // A digest that is not one, and a request with neither spec nor digest, are
    // malformed, named by their field.
    let err = specs
        .decode_request(&dispatched(&[1, 2, 3]))
        .await
        .expect_err("3 bytes");
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    assert!(err.to_string().contains("agent_spec_digest"), "{err}");
    let err = specs
        .decode_request(&dispatched(&[]))
        .await
        .expect_err("no spec");
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    assert!(err.to_string().contains("agent_spec"), "{err}");
    s.stop().await;
}

#[tokio::test]
async fn a_request_with_its_spec_inline_needs_no_lookup() {
    let s = served().await;
    let specs = AgentSpecs::new(s.bus.clone());
    let mut wire = pb::TaskRequest::decode(dispatched(&[]).as_slice()).expect("decodes");
    let known = known_spec().to_wire();
    wire.agent_spec = known.spec;
    wire.subagents = known.subagents;
    let request = specs
        .decode_request(&wire.encode_to_vec())
        .await
        .expect("inline");
    assert_eq!(request.spec_bundle(), known_spec());
    assert_eq!(s.handler.spec_lookups.load(Ordering::SeqCst), 0);
    s.stop().await;
}

#[tokio::test]
async fn a_malformed_request_is_invalid_argument_and_the_server_keeps_serving() {
    let s = served().await;
    let client = s.bus.client().clone();
    let subjects = s.bus.subjects().clone();
    let ask = |subject: String, body: Vec<u8>| {
        let client = client.clone();
        async move {
            client
                .request(subject, body.into())
                .await
                .expect("answered")
                .payload
        }
    };

    let garbage = ask(subjects.rpc("session.load"), b"\xff\xff\xff".to_vec()).await;
    let reply = pb::SessionLoadReply::decode(garbage).expect("a reply");
    let status = reply.status.expect("a status");
    assert_eq!(status.code, "INVALID_ARGUMENT");
    assert!(
        status.message.starts_with("malformed session load"),
        "{status:?}"
    );

    let bad_id = pb::SessionLoad {
        session_id: "not-a-session".into(),
        task_id: TaskId::generate().to_string(),
    };
    let reply = pb::SessionLoadReply::decode(
        ask(subjects.rpc("session.load"), bad_id.encode_to_vec()).await,
    )
    .expect("a reply");
    let status = reply.status.expect("a status");
    assert_eq!(status.code, "INVALID_ARGUMENT");
    assert!(
        status.message.contains("`session_id`"),
        "names the field: {status:?}"
    );

    let claim = pb::ClaimReply::decode(ask(subjects.claim(), b"\xff\xff".to_vec()).await)
        .expect("a claim reply");
    assert_eq!(claim.status.expect("a status").code, "INVALID_ARGUMENT");
    assert_eq!(claim.verdict, pb::claim_reply::Verdict::Unknown as i32);

    let unknown = pb::SessionSaveReply::decode(ask(subjects.rpc("frobnicate"), Vec::new()).await)
        .expect("a reply");
    assert_eq!(unknown.status.expect("a status").code, "UNIMPLEMENTED");

    // The handler saw none of them, and still serves.
    let before = s.handler.served.load(Ordering::SeqCst);
    let task = TaskId::generate();
    assert_eq!(
        s.bus.task_lookup(task, task).await.map(|t| t.task),
        Ok(task)
    );
    assert_eq!(s.handler.served.load(Ordering::SeqCst), before + 1);
    s.stop().await;
}

/// A subscriber that counts requests on `subject` and never answers.
async fn black_hole(bus: &Bus, subject: String) -> Arc<AtomicUsize> {
    let seen = Arc::new(AtomicUsize::new(0));
    let mut sub = bus.client().subscribe(subject).await.expect("subscribes");
    bus.client().flush().await.expect("flushed");
    tokio::spawn({
        let seen = seen.clone();
        async move {
            while sub.next().await.is_some() {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    seen
}

#[tokio::test]
async fn an_unanswered_claim_is_unavailable_after_its_table_timeout_and_sent_once() {
    let nats = NatsServer::start().expect("nats-server starts (apt-get install nats-server)");
    let client = async_nats::connect(nats.url()).await.expect("connects");
    let bus = Bus::new(client, Subjects::new("bustest"));
    let seen = black_hole(&bus, bus.subjects().claim()).await;
    let started = Instant::now();
    let e = bus
        .claim(&ClaimRequest {
            task: TaskId::generate(),
            worker: WorkerId::new("w1"),
            delivery: 1,
        })
        .await
        .expect_err("unanswered");
    let waited = started.elapsed();
    assert_eq!(e.code(), ErrorCode::Unavailable, "{e}");
    assert!(
        waited >= Method::Claim.timeout(),
        "gave up after {waited:?}"
    );
    assert!(
        waited < Method::Claim.timeout() + Duration::from_secs(3),
        "waited {waited:?}"
    );
    assert_eq!(seen.load(Ordering::SeqCst), 1, "a claim is never repeated");
}

#[tokio::test]
async fn an_unanswered_idempotent_request_is_tried_as_often_as_the_table_says() {
    let nats = NatsServer::start().expect("nats-server starts (apt-get install nats-server)");
    let client = async_nats::connect(nats.url()).await.expect("connects");
    let try_timeout = Duration::from_millis(200);
    let bus =
        Bus::new(client, Subjects::new("bustest")).with_timeout(Method::SessionLoad, try_timeout);
    let seen = black_hole(&bus, Method::SessionLoad.subject(bus.subjects())).await;
    let started = Instant::now();
    let e = bus
        .session_load(SessionId::generate(), TaskId::generate())
        .await
        .expect_err("unanswered");
    assert_eq!(e.code(), ErrorCode::Unavailable, "{e}");
    let tries = Method::SessionLoad.retry().tries();
    assert_eq!(seen.load(Ordering::SeqCst), tries as usize);
    assert!(started.elapsed() >= try_timeout * tries);

    // Nobody listening at all is the same outage, reported without waiting out the
    // timeouts.
    let e = bus
        .task_lookup(TaskId::generate(), TaskId::generate())
        .await
        .expect_err("no responders");
    assert_eq!(e.code(), ErrorCode::Unavailable);
    assert!(e.message.contains("no coordinator is listening"), "{e}");
}

#[tokio::test]
async fn the_tasks_consumer_takes_the_ack_wait_of_the_worker_that_starts_with_another() {
    let nats = NatsServer::start().expect("nats-server starts (apt-get install nats-server)");
    let client = async_nats::connect(nats.url()).await.expect("connects");
    let js = async_nats::jetstream::new(client);
    let with = |ack_wait| taskwire_bus::BusConfig {
        subjects: Subjects::new("bustest"),
        ack_wait,
        ..Default::default()
    };
    // As an earlier version made it.
    let old = with(Duration::from_secs(30));
    taskwire_bus::ensure_streams(&js, &old)
        .await
        .expect("streams");
    let mut consumer = taskwire_bus::tasks_consumer(&js, &old, "default", -1)
        .await
        .expect("consumer");
    assert_eq!(
        consumer.info().await.expect("info").config.ack_wait,
        Duration::from_secs(30)
    );
    let new = with(Duration::from_secs(6));
    let mut consumer = taskwire_bus::tasks_consumer(&js, &new, "default", -1)
        .await
        .expect("the same consumer, updated");
    let info = consumer.info().await.expect("info");
    assert_eq!(info.config.ack_wait, Duration::from_secs(6));
    assert_eq!(
        info.name,
        Subjects::new("bustest").workers_consumer("default")
    );
}

fn claim(delivery: u64) -> ClaimRequest {
    ClaimRequest {
        task: TaskId::generate(),
        worker: WorkerId::new("w1"),
        delivery,
    }
}

#[tokio::test]
async fn claims_asked_at_once_go_as_one_batch_and_each_gets_its_own_answer() {
    let s = served().await;
    let claimer = Claimer::start(s.bus.clone(), CancellationToken::new());
    let asked: Vec<ClaimRequest> = (1..=20).map(claim).collect();
    let answers = futures::future::join_all(asked.iter().map(|c| claimer.claim(c.clone()))).await;
    for (c, answer) in asked.iter().zip(answers) {
        match answer {
            Ok(ClaimVerdict::Granted(g)) => assert_eq!(u64::from(g.attempt), c.delivery),
            other => panic!("claim {} answered {other:?}", c.delivery),
        }
    }
    let batches = s
        .handler
        .claim_batches
        .lock()
        .expect("not poisoned")
        .clone();
    assert_eq!(batches.iter().sum::<usize>(), 20, "{batches:?}");
    assert!(
        batches.len() <= 2,
        "20 claims asked at once took {} handler calls: {batches:?}",
        batches.len()
    );

    // One claim alone is a plain claim, answered as before.
    let alone = claimer.claim(claim(3)).await.expect("answered");
    assert!(matches!(alone, ClaimVerdict::Granted(g) if g.attempt == 3));
    s.stop().await;
}

#[tokio::test]
async fn a_malformed_claim_in_a_batch_is_refused_alone_and_a_malformed_batch_whole() {
    let s = served().await;
    let client = s.bus.client().clone();
    let subject = s.bus.subjects().claims();
    let good = pb::ClaimRequest {
        task_id: TaskId::generate().to_string(),
        worker_id: "w1".into(),
        delivery: 4,
    };
    let bad = pb::ClaimRequest {
        task_id: "not-a-task".into(),
        ..good.clone()
    };
    let batch = pb::ClaimBatch {
        claims: vec![good, bad],
    };
    let reply = client
        .request(subject.clone(), batch.encode_to_vec().into())
        .await
        .expect("answered");
    let reply = pb::ClaimBatchReply::decode(reply.payload).expect("a batch reply");
    assert!(reply.status.unwrap_or_default().code.is_empty());
    assert_eq!(reply.replies.len(), 2);
    assert_eq!(
        reply.replies[0].verdict,
        pb::claim_reply::Verdict::Granted as i32
    );
    assert_eq!(reply.replies[0].attempt, 4);
    let refused = reply.replies[1].status.clone().expect("a status");
    assert_eq!(refused.code, "INVALID_ARGUMENT");
    assert!(refused.message.contains("`task_id`"), "{refused:?}");

    let garbage = client
        .request(subject, b"\xff\xff".to_vec().into())
        .await
        .expect("answered");
    let reply = pb::ClaimBatchReply::decode(garbage.payload).expect("a batch reply");
    assert_eq!(reply.status.expect("a status").code, "INVALID_ARGUMENT");
    assert!(reply.replies.is_empty());
    // Only the good claim reached the handler; the server still serves.
    assert_eq!(
        s.handler
            .claim_batches
            .lock()
            .expect("not poisoned")
            .clone(),
        vec![1]
    );
    assert!(s.bus.claim(&claim(1)).await.is_ok());
    s.stop().await;
}

#[tokio::test]
async fn claims_are_asked_one_at_a_time_of_coordinators_that_serve_no_batches() {
    let nats = NatsServer::start().expect("nats-server starts (apt-get install nats-server)");
    let client = async_nats::connect(nats.url()).await.expect("connects");
    let bus = Bus::new(client, Subjects::new("bustest"));
    // A coordinator of an earlier version: single claims only, each granted at the
    // attempt of its delivery.
    let mut single = bus
        .client()
        .queue_subscribe(bus.subjects().claim(), "taskwire-coordinators".into())
        .await
        .expect("subscribes");
    bus.client().flush().await.expect("flushed");
    let answered = Arc::new(AtomicUsize::new(0));
    tokio::spawn({
        let (client, answered) = (bus.client().clone(), answered.clone());
        async move {
            while let Some(msg) = single.next().await {
                let asked = pb::ClaimRequest::decode(msg.payload).expect("a claim");
                let reply = pb::ClaimReply {
                    verdict: pb::claim_reply::Verdict::Granted as i32,
                    claim_epoch: 1,
                    attempt: u32::try_from(asked.delivery).expect("small"),
                    ..Default::default()
                };
                answered.fetch_add(1, Ordering::SeqCst);
                let to = msg.reply.expect("a request");
                client
                    .publish(to, reply.encode_to_vec().into())
                    .await
                    .expect("answers");
            }
        }
    });
    let claimer = Claimer::start(bus.clone(), CancellationToken::new());
    let asked: Vec<ClaimRequest> = (1..=5).map(claim).collect();
    let answers = futures::future::join_all(asked.iter().map(|c| claimer.claim(c.clone()))).await;
    for (c, answer) in asked.iter().zip(answers) {
        assert!(
            matches!(answer, Ok(ClaimVerdict::Granted(g)) if u64::from(g.attempt) == c.delivery),
            "claim {}",
            c.delivery
        );
    }
    assert_eq!(answered.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn coordinators_starting_together_both_set_up_the_streams() {
    let nats = NatsServer::start().expect("nats-server starts (apt-get install nats-server)");
    // The race is between two lookups and two creates: thirty rounds meet it often.
    for round in 0..30 {
        let subjects = Subjects::new(&format!("together{round}"));
        let config = taskwire_bus::BusConfig {
            subjects: subjects.clone(),
            ..taskwire_bus::BusConfig::default()
        };
        let a = Bus::new(
            async_nats::connect(nats.url()).await.expect("connects"),
            subjects.clone(),
        );
        let b = Bus::new(
            async_nats::connect(nats.url()).await.expect("connects"),
            subjects.clone(),
        );
        let (set_a, set_b) = tokio::join!(a.ensure_streams(&config), b.ensure_streams(&config));
        set_a.expect("the first coordinator sets up the streams");
        set_b.expect("the second coordinator sets up the streams");
        assert!(
            a.js().get_stream(subjects.tasks_stream()).await.is_ok(),
            "round {round}: the tasks stream exists"
        );
    }
}
