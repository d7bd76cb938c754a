//! Builders shared by the store's tests: a store on a fresh database, a task, a
//! result, a claim.
#![allow(dead_code)] // each test file uses its own part

use chrono::Utc;
use taskwire_protocol::{
    ClaimEpoch, Provenance, TaskId, TaskRequest, TaskResult, TaskStatus, TraceId, Usage, WorkerId,
    pb,
};
use taskwire_store::{ClaimOutcome, NewTask, Store};
use taskwire_test_support::TestDatabase;

pub async fn store() -> (TestDatabase, Store) {
    store_with(4).await
}

/// A store of `connections` on a database of its own.
pub async fn store_with(connections: u32) -> (TestDatabase, Store) {
    let db = TestDatabase::create().await.expect("test database");
    let store = Store::connect(db.url(), connections)
        .await
        .expect("connect and migrate");
    (db, store)
}

pub fn task(key: Option<&str>, digest: &str) -> NewTask {
    let request = TaskRequest {
        task_id: TaskId::generate(),
        parent_task_id: None,
        trace_id: TraceId::generate(),
        tenant: "acme".into(),
        sender: "test".into(),
        agent: "general".into(),
        intent: String::new(),
        prompt: "do it".into(),
        input: None,
        context_refs: vec![],
        attachments: vec![],
        auth_scope: vec![],
        idempotency_key: key.map(str::to_owned),
        deadline: None,
        resume_token: None,
        model: None,
        max_steps: None,
        command: None,
        depth: 0,
        attempt: 0,
        agent_spec: std::sync::Arc::new(pb::AgentSpec {
            name: "general".into(),
            prompt: "You are a general agent. ".repeat(40),
            ..Default::default()
        }),
        created_at: Utc::now(),
        max_attempts: 2,
        parent_model: None,
        subtask: None,
        max_depth: 1,
        subagents: std::sync::Arc::from([(
            "explore".to_owned(),
            "Reads code and answers questions about it.".to_owned(),
        )]),
        new_session: true,
        inherited_permission: vec![],
        workspace_patch: String::new(),
        output_schema: None,
        expand_shell: false,
        traceparent: String::new(),
        workspace_patch_ref: None,
        budget: Default::default(),
        spent_elsewhere: Default::default(),
        priority: Default::default(),
        fork: None,
    };
    NewTask {
        request,
        digest: digest.into(),
        title: None,
        subject: "t.tasks.default".into(),
        inline_agent_spec: false,
        callback_url: None,
        not_before: None,
    }
}

pub fn result(id: TaskId, epoch: ClaimEpoch, text: &str) -> TaskResult {
    TaskResult {
        task_id: id,
        trace_id: TraceId::generate(),
        attempt: 1,
        claim_epoch: epoch,
        status: TaskStatus::Completed,
        text: text.into(),
        structured: None,
        tool_calls: vec![],
        errors: vec![],
        usage: Usage {
            input_tokens: 3,
            output_tokens: 4,
            ..Usage::default()
        },
        own_usage: Usage {
            input_tokens: 3,
            output_tokens: 4,
            ..Usage::default()
        },
        latency_ms: 5,
        steps: 1,
        session_id: None,
        worker_id: None,
        retry_scheduled: false,
        transcript_json: None,
        patch: format!("diff --git a/{text}.txt b/{text}.txt\n"),
        title: None,
        provenance: vec![Provenance {
            source: "read".into(),
            uri: format!("{text}.txt"),
            excerpt: String::new(),
        }],
        traceparent: String::new(),
        patch_ref: None,
    }
}

pub async fn claim(store: &Store, id: TaskId) -> ClaimOutcome {
    store
        .claim_tasks(&[(id, WorkerId::new("w1"))], None)
        .await
        .expect("claim")[0]
}
