//! [`Bus`]: one deployment's NATS connection, subjects and request timeouts, and the
//! typed worker requests on it. A call site reads like a function call:
//! `bus.session_load(session, task).await?` returns domain values or an [`RpcError`]
//! whose code says what to do; the subject, the codec, the timeout and the retry of
//! each request come from the [method table](crate::methods).

use std::time::Duration;

use async_nats::jetstream;
use bytes::Bytes;
use taskwire_protocol::{AgentSpecBundle, AgentSpecDigest, ErrorCode, SessionId, TaskId};

use crate::Subjects;
use crate::codec::encode;
use crate::error::{BusError, RpcError};
use crate::headers::{self, Outgoing};
use crate::messages::{
    AgentSpecLookup, ApprovalAsk, ApprovalDecision, ApprovalRequest, ChildSubmit, ChildSubmitted,
    ClaimBatch, ClaimRequest, ClaimVerdict, SessionLoad, SessionSave, StoredSession, TaskLookup,
    TaskState,
};
use crate::methods::{Method, Retry};
use crate::replies;

/// The bus of one deployment, shared by every loop of a process (cheap to clone).
#[derive(Clone)]
pub struct Bus {
    client: async_nats::Client,
    js: jetstream::Context,
    subjects: Subjects,
    /// Per-method timeouts that replace the table's (a configured claim timeout).
    timeouts: Vec<(Method, Duration)>,
    /// Given a permit each time this process sends a finished notice
    /// ([`Bus::finished_here`]).
    finished_here: std::sync::Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for Bus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bus")
            .field("prefix", &self.subjects.prefix())
            .field("timeouts", &self.timeouts)
            .finish()
    }
}

impl Bus {
    pub fn new(client: async_nats::Client, subjects: Subjects) -> Self {
        let js = jetstream::new(client.clone());
        Self {
            client,
            js,
            subjects,
            timeouts: Vec::new(),
            finished_here: std::sync::Arc::default(),
        }
    }

    /// Wakes (one permit, kept until taken) whenever this process, on this bus or a
    /// clone of it, sends a finished notice: a hint, costing no message, for a loop
    /// that acts on tasks this process ended. A task another process ended is that
    /// process's to act on.
    pub fn finished_here(&self) -> &tokio::sync::Notify {
        &self.finished_here
    }

    /// Connects to NATS as `name` ([`connect_with`](crate::connect_with)) and makes the
    /// bus of the deployment named by `subjects` on that connection.
    pub async fn connect(
        url: &str,
        name: &str,
        options: &crate::NatsOptions,
        subjects: Subjects,
    ) -> Result<Self, BusError> {
        let client = crate::connect_with(url, name, options).await?;
        Ok(Self::new(client, subjects))
    }

    /// The same bus, with `method`'s tries waiting `timeout` instead of the table's.
    pub fn with_timeout(mut self, method: Method, timeout: Duration) -> Self {
        self.timeouts.retain(|(m, _)| *m != method);
        self.timeouts.push((method, timeout));
        self
    }

    /// The raw connection, for the bus's own modules and tests: the coordinator and
    /// the worker use the typed functions.
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }
    /// The raw JetStream context (see [`Self::client`]).
    pub fn js(&self) -> &jetstream::Context {
        &self.js
    }
    pub fn subjects(&self) -> &Subjects {
        &self.subjects
    }

    /// Whether the connection is up now (it reconnects by itself when it is not).
    pub fn is_connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    /// Waits until everything published so far is written to the server.
    pub async fn flush(&self) -> Result<(), BusError> {
        self.client.flush().await.map_err(|e| BusError::Request {
            action: "flush the nats connection".to_owned(),
            reason: e.to_string(),
        })
    }

    /// The largest message the server takes, in bytes.
    pub fn max_payload(&self) -> usize {
        self.client.server_info().max_payload
    }

    /// The deployment's patch bucket, on this connection.
    pub fn patches(&self) -> crate::Patches {
        crate::Patches::new(self.js.clone(), &self.subjects)
    }

    /// How long one try of `method` waits.
    pub fn timeout(&self, method: Method) -> Duration {
        self.timeouts
            .iter()
            .find(|(m, _)| *m == method)
            .map_or_else(|| method.timeout(), |(_, t)| *t)
    }

    /// Asks to run a task: a verdict, or `NOT_FOUND` for a task that does not exist,
    /// `UNAVAILABLE` when no coordinator answered.
    pub async fn claim(&self, claim: &ClaimRequest) -> Result<ClaimVerdict, RpcError> {
        let reply = self.request(Method::Claim, None, encode(claim)).await?;
        replies::decode_claim_reply(&reply)
    }

    /// Asks to run several tasks in one request: an answer per claim, in order (each
    /// a verdict, or that claim's refusal); the batch's refusal, or `UNAVAILABLE` when
    /// no coordinator answered. `Ok(None)` when no coordinator serves batches (every
    /// one is of an earlier version): ask one claim at a time.
    pub async fn claim_batch(
        &self,
        claims: &[ClaimRequest],
    ) -> Result<Option<Vec<Result<ClaimVerdict, RpcError>>>, RpcError> {
        let body = encode(&ClaimBatch(claims.to_vec()));
        match self.request(Method::ClaimBatch, None, body).await {
            Ok(reply) => replies::decode_claim_batch_reply(&reply, claims.len()).map(Some),
            Err(Unanswered::NoResponders) => Ok(None),
            Err(Unanswered::Refused(e)) => Err(e),
        }
    }

    /// Submits a child task. Repeated when unanswered only when the request has an
    /// idempotency key (the same call then finds the same child).
    pub async fn child_submit(&self, submit: &ChildSubmit) -> Result<ChildSubmitted, RpcError> {
        let retry = (submit.request.idempotency_key.is_empty()).then_some(Retry::Never);
        let reply = self
            .request(Method::ChildSubmit, retry, encode(submit))
            .await?;
        replies::decode_child_reply(&reply)
    }

    /// Reads `task` as `asking` may see it (`NOT_FOUND` outside its tenant).
    pub async fn task_lookup(&self, task: TaskId, asking: TaskId) -> Result<TaskState, RpcError> {
        let body = encode(&TaskLookup { task, asking });
        let reply = self.request(Method::TaskLookup, None, body).await?;
        replies::decode_lookup_reply(&reply)
    }

    /// The agent spec bundle named by `digest`, checked against it. Most callers want
    /// [`AgentSpecs`](crate::specs::AgentSpecs), which asks once per bundle.
    pub async fn agent_spec(&self, digest: AgentSpecDigest) -> Result<AgentSpecBundle, RpcError> {
        let body = encode(&AgentSpecLookup { digest });
        let reply = self.request(Method::AgentSpec, None, body).await?;
        replies::decode_spec_reply(&reply, digest)
    }

    /// The saved transcript of `session` for `task`, which runs in it; `None` for a
    /// session with none saved yet.
    pub async fn session_load(
        &self,
        session: SessionId,
        task: TaskId,
    ) -> Result<Option<StoredSession>, RpcError> {
        let body = encode(&SessionLoad { session, task });
        let reply = self.request(Method::SessionLoad, None, body).await?;
        replies::decode_load_reply(&reply)
    }

    /// Saves a transcript, fenced by the saving task's claim (`FAILED_PRECONDITION`
    /// for a stale attempt).
    pub async fn session_save(&self, save: &SessionSave) -> Result<(), RpcError> {
        let reply = self
            .request(Method::SessionSave, None, encode(save))
            .await?;
        replies::decode_save_reply(&reply)
    }

    /// Marks the task awaiting approval; the answer arrives as an
    /// [`ApprovalDecision`] on the task's approval subject.
    pub async fn approval_ask(&self, ask: &ApprovalAsk) -> Result<(), RpcError> {
        let body = encode(&ApprovalRequest::Ask(ask.clone()));
        let reply = self.request(Method::ApprovalAsk, None, body).await?;
        replies::decode_approval_reply(&reply).map(|_| ())
    }

    /// The answer to an approval, once it is answered.
    pub async fn approval_check(
        &self,
        task: TaskId,
        request_id: &str,
    ) -> Result<Option<ApprovalDecision>, RpcError> {
        let body = encode(&ApprovalRequest::Check {
            task,
            request_id: request_id.to_owned(),
        });
        let reply = self.request(Method::ApprovalCheck, None, body).await?;
        replies::decode_approval_reply(&reply)
    }

    /// Closes an unanswered approval (the task runs on, denied); an answer that beat
    /// the timeout comes back instead and stands.
    pub async fn approval_timeout(
        &self,
        task: TaskId,
        request_id: &str,
    ) -> Result<Option<ApprovalDecision>, RpcError> {
        let body = encode(&ApprovalRequest::TimedOut {
            task,
            request_id: request_id.to_owned(),
        });
        let reply = self.request(Method::ApprovalTimeout, None, body).await?;
        replies::decode_approval_reply(&reply)
    }

    /// Sends one request as the table says (or with `retry` instead of its policy);
    /// returns the reply's bytes, or `UNAVAILABLE` when no try was answered
    /// ([`Unanswered::NoResponders`] when no coordinator listened to the last).
    async fn request(
        &self,
        method: Method,
        retry: Option<Retry>,
        payload: Bytes,
    ) -> Result<Bytes, Unanswered> {
        let subject = method.subject(&self.subjects);
        let timeout = self.timeout(method);
        let retry = retry.unwrap_or_else(|| method.retry());
        let mut last = String::new();
        let mut no_responders = false;
        let mut delays = retry.delays();
        for attempt in 0..retry.tries() {
            if attempt > 0 {
                tokio::time::sleep(delays.next().unwrap_or_default()).await;
            }
            let mut request = async_nats::Request::new()
                .payload(payload.clone())
                .timeout(Some(timeout));
            if let Some(h) = headers::build(&Outgoing::default()) {
                request = request.headers(h);
            }
            match self.client.send_request(subject.clone(), request).await {
                Ok(reply) => return Ok(reply.payload),
                Err(e) => {
                    use async_nats::RequestErrorKind as K;
                    no_responders = e.kind() == K::NoResponders;
                    last = match e.kind() {
                        K::TimedOut => format!("no answer within {timeout:?}"),
                        K::NoResponders => "no coordinator is listening".to_owned(),
                        // Sending it again cannot help.
                        K::MaxPayloadExceeded | K::InvalidSubject => {
                            return Err(Unanswered::Refused(RpcError::new(
                                ErrorCode::InvalidArgument,
                                format!("{method} on {subject} cannot be sent: {e}"),
                            )));
                        }
                        _ => e.to_string(),
                    };
                    tracing::debug!(method = %method, attempt, error = %last, "worker request unanswered");
                }
            }
        }
        if no_responders && method == Method::ClaimBatch {
            return Err(Unanswered::NoResponders);
        }
        Err(Unanswered::Refused(RpcError::new(
            ErrorCode::Unavailable,
            format!(
                "{method} on {subject} failed after {} tries: {last}",
                retry.tries()
            ),
        )))
    }
}

/// Why a request got no reply.
enum Unanswered {
    /// No coordinator listens to its subject (told apart only for claim batches, which
    /// coordinators of an earlier version do not serve).
    NoResponders,
    /// Refused before it was sent, or unanswered (`UNAVAILABLE`).
    Refused(RpcError),
}

impl From<Unanswered> for RpcError {
    fn from(u: Unanswered) -> Self {
        match u {
            Unanswered::NoResponders => RpcError::new(
                ErrorCode::Unavailable,
                "no coordinator is listening".to_owned(),
            ),
            Unanswered::Refused(e) => e,
        }
    }
}
