//! The typed bus against a real nats-server: a coordinator-side handler served by
//! [`taskwire_bus::serve`], called through [`taskwire_bus::Bus`]'s typed requests.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use prost::Message as _;
use taskwire_bus::messages::{
    Answer, ApprovalAsk, ApprovalDecision, ChildSubmit, ChildSubmitted, Claim, ClaimRequest,
    ClaimVerdict, SessionLoad, SessionSave, StoredSession, TaskLookup, TaskState,
};
use taskwire_bus::{Bus, Method, RpcError, Subjects, WorkerRequests};
use taskwire_protocol::{ClaimEpoch, ErrorCode, SessionId, TaskId, TaskStatus, WorkerId, pb};
use taskwire_test_support::NatsServer;
use tokio_util::sync::CancellationToken;

/// A coordinator with fixed answers: every session has a transcript saved by its
/// task; tasks are running; claims are granted at epoch 7; children are refused.
#[derive(Default)]
struct Fixed {
    served: AtomicUsize,
}

#[async_trait]
impl WorkerRequests for Fixed {
    async fn claim(
        &self,
        claims: Vec<ClaimRequest>,
    ) -> Vec<Option<Result<ClaimVerdict, RpcError>>> {
        self.served.fetch_add(claims.len(), Ordering::SeqCst);
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
