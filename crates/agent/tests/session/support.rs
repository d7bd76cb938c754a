//! The scripted model, the scripted host and the workspace fixture shared by the
//! session tests.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use taskwire_agent::{
    ApprovalAnswer, ApprovalRequest, ChildProgress, ChildTaskRequest, ChildTaskResult, NoopHost,
    SessionEvent, SessionHost, SessionOutcome, SessionParams, ToolCallState, ToolRegistry,
    Transcript, Workspace, run_session,
};
use taskwire_definitions::AgentSpec;
use taskwire_llm::{
    ChatRequest, ChatResponse, FinishReason, LlmError, Message, Provider, Role, StreamDelta,
    ToolCall, Usage,
};
use tokio_util::sync::CancellationToken;

pub(crate) enum Answer {
    Reply(ChatResponse),
    Fail(LlmError),
    /// Never answers, like a model that is still thinking.
    Hang,
}

#[derive(Default)]
pub(crate) struct ScriptedModel {
    script: Mutex<VecDeque<Answer>>,
    requests: Mutex<Vec<ChatRequest>>,
}

impl ScriptedModel {
    pub(crate) fn new(script: impl IntoIterator<Item = Answer>) -> Self {
        Self {
            script: Mutex::new(script.into_iter().collect()),
            requests: Mutex::default(),
        }
    }

    pub(crate) fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().expect("not poisoned").clone()
    }
}

#[async_trait::async_trait]
impl Provider for ScriptedModel {
    async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ChatResponse, LlmError> {
        self.requests
            .lock()
            .expect("not poisoned")
            .push(request.clone());
        let answer = self.script.lock().expect("not poisoned").pop_front();
        match answer.expect("the script has an answer for every model call") {
            Answer::Reply(response) => {
                if !response.text.is_empty() {
                    on_delta(StreamDelta::Text(response.text.clone()));
                }
                Ok(response)
            }
            Answer::Fail(err) => Err(err),
            Answer::Hang => std::future::pending().await,
        }
    }
}

pub(crate) fn usage(input: u64, output: u64) -> Usage {
    Usage::tokens(input, output)
}

pub(crate) fn text(text: &str) -> Answer {
    Answer::Reply(ChatResponse {
        text: text.into(),
        tool_calls: Vec::new(),
        usage: usage(10, 5),
        finish_reason: FinishReason::Stop,
        reasoning: Vec::new(),
    })
}

pub(crate) fn calls(calls: &[(&str, &str, serde_json::Value)]) -> Answer {
    Answer::Reply(ChatResponse {
        text: String::new(),
        tool_calls: calls
            .iter()
            .map(|(id, name, args)| ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: args.to_string(),
            })
            .collect(),
        usage: usage(10, 5),
        finish_reason: FinishReason::ToolCalls,
        reasoning: Vec::new(),
    })
}

pub(crate) fn call(id: &str, name: &str, args: serde_json::Value) -> Answer {
    calls(&[(id, name, args)])
}

pub(crate) struct Fixture {
    _dir: tempfile::TempDir,
    pub(crate) workspace: Workspace,
    events: Mutex<Vec<SessionEvent>>,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let files = [
            ("src/lib.rs", "pub fn run() {}\n// TODO: handle errors\n"),
            ("src/main.rs", "fn main() { lib::run() }\n"),
            ("notes.txt", "secret plans\n"),
        ];
        for (file, content) in files {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().expect("has parent")).expect("mkdir");
            std::fs::write(path, content).expect("write");
        }
        let workspace = Workspace::new(dir.path()).expect("workspace");
        Self {
            _dir: dir,
            workspace,
            events: Mutex::default(),
        }
    }

    pub(crate) fn params(&self, agent: AgentSpec, max_steps: u32) -> SessionParams {
        SessionParams {
            agent,
            model: "test-model".into(),
            prompt: "find the TODO".into(),
            max_steps,
            history: Transcript::new("ses-test"),
            workspace: self.workspace.clone(),
            inherited_permission: Vec::new(),
            from_checkpoint: false,
            workspace_facts: None,
            instructions: Vec::new(),
            compaction: None,
            budget: Default::default(),
            prompt_caching: true,
            priority: 0,
            hooks: Default::default(),
            fork: None,
        }
    }

    pub(crate) async fn run(&self, params: SessionParams, model: &ScriptedModel) -> SessionOutcome {
        self.run_with(params, model, &NoopHost, CancellationToken::new(), |_| {})
            .await
    }

    pub(crate) async fn run_hosted(
        &self,
        params: SessionParams,
        model: &ScriptedModel,
        host: &dyn SessionHost,
    ) -> SessionOutcome {
        self.run_with(params, model, host, CancellationToken::new(), |_| {})
            .await
    }

    /// Runs a session; `also` sees each event after it is recorded.
    pub(crate) async fn run_with(
        &self,
        params: SessionParams,
        model: &dyn Provider,
        host: &dyn SessionHost,
        cancel: CancellationToken,
        also: impl Fn(&SessionEvent) + Send + Sync,
    ) -> SessionOutcome {
        let observer = |event: SessionEvent| {
            also(&event);
            self.events.lock().expect("not poisoned").push(event);
        };
        let tools = ToolRegistry::builtin();
        let session = run_session(params, model, &tools, host, &observer, cancel);
        tokio::time::timeout(Duration::from_secs(10), session)
            .await
            .expect("session ends promptly")
    }

    /// Records an event, as the session observer does.
    pub(crate) fn record(&self, event: SessionEvent) {
        self.events.lock().expect("not poisoned").push(event);
    }

    pub(crate) fn events(&self) -> Vec<SessionEvent> {
        self.events.lock().expect("not poisoned").clone()
    }

    /// The states one call went through, in order.
    pub(crate) fn states_of(&self, call_id: &str) -> Vec<ToolCallState> {
        self.tool_events()
            .into_iter()
            .filter(|(id, ..)| id == call_id)
            .map(|(_, state, ..)| state)
            .collect()
    }

    /// The tool-call events as `(call_id, state, title, error)`.
    pub(crate) fn tool_events(&self) -> Vec<(String, ToolCallState, String, Option<String>)> {
        self.events()
            .into_iter()
            .filter_map(|event| match event {
                SessionEvent::ToolCall {
                    call_id,
                    state,
                    title,
                    error,
                    ..
                } => Some((call_id, state, title, error)),
                _ => None,
            })
            .collect()
    }
}

pub(crate) fn tool_event(
    call_id: &str,
    tool: &str,
    state: ToolCallState,
    title: &str,
) -> SessionEvent {
    SessionEvent::ToolCall {
        call_id: call_id.into(),
        tool: tool.into(),
        state,
        title: title.into(),
        error: None,
        metadata: None,
    }
}

/// `events` with the tools' metadata left out, to compare with [`tool_event`]s.
pub(crate) fn without_metadata(events: Vec<SessionEvent>) -> Vec<SessionEvent> {
    events
        .into_iter()
        .map(|event| match event {
            SessionEvent::ToolCall {
                call_id,
                tool,
                state,
                title,
                error,
                ..
            } => SessionEvent::ToolCall {
                call_id,
                tool,
                state,
                title,
                error,
                metadata: None,
            },
            other => other,
        })
        .collect()
}

pub(crate) fn tool_names(request: &ChatRequest) -> Vec<&str> {
    request.tools.iter().map(|tool| &*tool.name).collect()
}

pub(crate) fn tool_result<'m>(messages: &'m [Message], call_id: &str) -> &'m str {
    messages
        .iter()
        .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(call_id))
        .map(|m| m.content.as_str())
        .expect("every call has a result")
}

/// Agents the test host knows: the listed ones and `scout`, a hidden subagent that is
/// callable by name but not listed.
const KNOWN_AGENTS: [&str; 3] = ["explore", "general", "scout"];

/// How the test host runs a child task, chosen by the child's prompt. An unknown agent
/// is refused, as the coordinator's registry refuses it.
fn child_result(request: &ChildTaskRequest) -> Result<ChildTaskResult, String> {
    if !KNOWN_AGENTS.contains(&request.subagent_type.as_str()) {
        return Err(format!(
            "the child task was refused: NotFound: agent `{}` not found",
            request.subagent_type
        ));
    }
    if request.prompt.contains("unreachable") {
        return Err(format!("no worker serves agent {}", request.subagent_type));
    }
    let status = if request.prompt.contains("crash") {
        "error"
    } else {
        "completed"
    };
    Ok(ChildTaskResult {
        task_id: format!("task-{}", request.description),
        session_id: format!("ses-{}", request.description),
        status: status.into(),
        text: format!("report on {}", request.prompt),
        usage: usage(3, 2),
        changes_not_applied: None,
        deferred_patch: None,
    })
}

/// A session host with scripted approval answers and in-process children.
pub(crate) struct TestHost {
    answers: Mutex<VecDeque<ApprovalAnswer>>,
    pub(crate) approvals: Mutex<Vec<ApprovalRequest>>,
    pub(crate) children: Mutex<Vec<ChildTaskRequest>>,
    /// When set, every child waits here first: two children can only both pass if
    /// they run at the same time.
    barrier: Option<tokio::sync::Barrier>,
    /// Every checkpoint saved, with how many children had been asked for by then.
    pub(crate) checkpoints: Mutex<Vec<(Transcript, usize)>>,
    /// When set, every checkpoint fails with this reason.
    refuse_checkpoints: Option<String>,
    /// How often the session asked for its workspace to be ready.
    pub(crate) workspace_asks: std::sync::atomic::AtomicUsize,
    /// When set, the workspace cannot be made ready.
    refuse_workspace: Option<taskwire_agent::SessionError>,
    /// Background children (by description) allowed to finish; until then they run.
    released: tokio::sync::watch::Sender<Vec<String>>,
    /// Background children (by description) that finished.
    done: tokio::sync::watch::Sender<Vec<String>>,
    /// The cancellation token every child was given.
    pub(crate) child_tokens: Mutex<Vec<CancellationToken>>,
    /// Every patch brought in with `apply_child_changes`.
    pub(crate) applied: Mutex<Vec<String>>,
    /// What the `task` tool lists.
    subagents: Vec<(String, String)>,
}

impl TestHost {
    pub(crate) fn new(answers: impl IntoIterator<Item = ApprovalAnswer>) -> Self {
        Self {
            answers: Mutex::new(answers.into_iter().collect()),
            approvals: Mutex::default(),
            children: Mutex::default(),
            barrier: None,
            checkpoints: Mutex::default(),
            refuse_checkpoints: None,
            workspace_asks: Default::default(),
            refuse_workspace: None,
            released: tokio::sync::watch::Sender::new(Vec::new()),
            done: tokio::sync::watch::Sender::new(Vec::new()),
            child_tokens: Mutex::default(),
            applied: Mutex::default(),
            subagents: vec![
                ("explore".into(), "Fast read-only search".into()),
                ("general".into(), "General-purpose".into()),
            ],
        }
    }

    /// Lets the background child described `description` finish.
    pub(crate) fn release(&self, description: &str) {
        self.released
            .send_modify(|released| released.push(description.to_owned()));
    }

    /// Waits until the background child described `description` has finished.
    pub(crate) async fn finished(&self, description: &str) {
        let mut done = self.done.subscribe();
        done.wait_for(|done| done.iter().any(|d| d == description))
            .await
            .expect("the host outlives its children");
    }

    pub(crate) fn applied(&self) -> Vec<String> {
        self.applied.lock().expect("not poisoned").clone()
    }

    /// The workspace cannot be made ready: `ensure_workspace` fails with `error`.
    pub(crate) fn refusing_workspace(mut self, error: taskwire_agent::SessionError) -> Self {
        self.refuse_workspace = Some(error);
        self
    }

    pub(crate) fn workspace_asks(&self) -> usize {
        self.workspace_asks
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Checkpoints fail with `reason`.
    pub(crate) fn refusing_checkpoints(mut self, reason: &str) -> Self {
        self.refuse_checkpoints = Some(reason.to_owned());
        self
    }

    pub(crate) fn children(&self) -> Vec<ChildTaskRequest> {
        self.children.lock().expect("not poisoned").clone()
    }

    pub(crate) fn checkpoints(&self) -> Vec<(Transcript, usize)> {
        self.checkpoints.lock().expect("not poisoned").clone()
    }

    /// Children wait until `n` of them are running at once.
    pub(crate) fn with_barrier(mut self, n: usize) -> Self {
        self.barrier = Some(tokio::sync::Barrier::new(n));
        self
    }

    pub(crate) fn approvals(&self) -> Vec<ApprovalRequest> {
        self.approvals.lock().expect("not poisoned").clone()
    }
}

#[async_trait::async_trait]
impl SessionHost for TestHost {
    async fn approve(
        &self,
        request: ApprovalRequest,
        asked: &(dyn Fn() + Send + Sync),
    ) -> ApprovalAnswer {
        self.approvals.lock().expect("not poisoned").push(request);
        asked();
        self.answers
            .lock()
            .expect("not poisoned")
            .pop_front()
            .unwrap_or(ApprovalAnswer::Reject {
                message: Some("no scripted answer".into()),
            })
    }

    async fn run_child(
        &self,
        request: ChildTaskRequest,
        on_progress: &(dyn Fn(ChildProgress) + Send + Sync),
        cancel: CancellationToken,
    ) -> Result<ChildTaskResult, String> {
        self.children
            .lock()
            .expect("not poisoned")
            .push(request.clone());
        self.child_tokens
            .lock()
            .expect("not poisoned")
            .push(cancel.clone());
        if let Some(barrier) = &self.barrier {
            barrier.wait().await;
        }
        let task_id = format!("task-{}", request.description);
        if KNOWN_AGENTS.contains(&request.subagent_type.as_str()) {
            on_progress(ChildProgress::Started {
                task_id: task_id.clone(),
                session_id: format!("ses-{}", request.description),
            });
        }
        for state in [
            ToolCallState::Pending,
            ToolCallState::Running,
            ToolCallState::Completed,
        ] {
            on_progress(ChildProgress::ToolCall {
                task_id: task_id.clone(),
                call_id: "child-c1".into(),
                tool: "grep".into(),
                title: "grep TODO".into(),
                state,
            });
        }
        if request.background && KNOWN_AGENTS.contains(&request.subagent_type.as_str()) {
            // A background child runs until the test lets it finish.
            let mut released = self.released.subscribe();
            tokio::select! {
                _ = released.wait_for(|r| r.contains(&request.description)) => {}
                () = cancel.cancelled() => return Err("cancelled with its parent".into()),
            }
            let mut result = child_result(&request)?;
            if request.prompt.contains("edit") {
                result.deferred_patch = Some(format!("patch of {}", request.description));
            }
            self.done
                .send_modify(|done| done.push(request.description.clone()));
            return Ok(result);
        }
        child_result(&request)
    }

    async fn apply_child_changes(&self, patch: &str) -> Result<(), String> {
        self.applied
            .lock()
            .expect("not poisoned")
            .push(patch.to_owned());
        if patch.contains("conflict") {
            return Err("conflict in a.txt".into());
        }
        Ok(())
    }

    async fn ensure_workspace(&self) -> Result<(), taskwire_agent::SessionError> {
        self.workspace_asks
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        match &self.refuse_workspace {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    async fn checkpoint(&self, transcript: &Transcript) -> Result<(), String> {
        if let Some(reason) = &self.refuse_checkpoints {
            return Err(reason.clone());
        }
        let started = self.children.lock().expect("not poisoned").len();
        self.checkpoints
            .lock()
            .expect("not poisoned")
            .push((transcript.clone(), started));
        Ok(())
    }

    fn subagents(&self) -> &[(String, String)] {
        &self.subagents
    }
}
