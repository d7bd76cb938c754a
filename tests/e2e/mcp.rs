//! MCP tools against real servers nobody here wrote: the reference server on npm
//! (`@modelcontextprotocol/server-everything`) over stdio, in the worker's sandbox, and
//! Streamable HTTP and stdio servers built with the official Python SDK
//! (`tests/mcp/*.py`). `scripts/setup.sh` installs them under
//! `~/.cache/taskwire/mcp`; outside CI a missing one skips with the reason, under CI it
//! fails.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use taskwire_e2e::{Cluster, created_in_patch, final_result, start_with, tool_events, wait_for};
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

/// `(node_modules, venv python)` as `scripts/setup.sh` installs them.
fn peers() -> Option<(PathBuf, PathBuf)> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let dir = home.join(".cache/taskwire/mcp");
    let modules = dir.join("node_modules");
    let python = dir.join("venv/bin/python");
    let missing: Vec<String> = [
        modules.join("@modelcontextprotocol/server-everything/dist/index.js"),
        modules.join("@modelcontextprotocol/server-filesystem/dist/index.js"),
        python.clone(),
    ]
    .into_iter()
    .filter(|p| !p.exists())
    .map(|p| format!("{} (install with scripts/setup.sh)", p.display()))
    .collect();
    if missing.is_empty() {
        return Some((modules, python));
    }
    let why = format!("the MCP tests need {}", missing.join(", "));
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("skipping: {why}");
    None
}

/// `tests/`.
fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_owned()
}

/// The model makes each round of calls in turn, then answers with every tool result
/// (and the tools it was offered) so the test reads them from the task's output.
fn rounds(
    rounds: Vec<Vec<(&'static str, &'static str, serde_json::Value)>>,
) -> impl Fn(&SeenRequest) -> ScriptedReply + Send + Sync + 'static {
    move |req: &SeenRequest| {
        let turn = req.assistant_turns();
        if let Some(calls) = rounds.get(turn) {
            return ScriptedReply::tool_calls(calls.clone());
        }
        let mut out = format!("offered: {}\n", req.tools.join(","));
        for calls in &rounds {
            for (id, _, _) in calls {
                let result = req.tool_result(id).replace('\n', " | ");
                out.push_str(&format!("{id} => {result}\n"));
            }
        }
        ScriptedReply::text(out)
    }
}

async fn cluster(config: &Path, model: ScriptedModel) -> Cluster {
    let dir = config.to_owned();
    start_with(model, 1, 4, move |c| c.config_dir = Some(dir))
        .await
        .expect("cluster")
}

async fn answer(cluster: &Cluster, agent: &str, prompt: &str) -> String {
    let id = cluster.submit(agent, prompt).await.expect("submit");
    let task = wait_for(cluster, &id, "finished", |t| t.result.is_some())
        .await
        .expect("task finished");
    let result = task.result.expect("result");
    assert_eq!(
        result.status(),
        pb::TaskStatus::Completed,
        "task failed: {:?}",
        result
    );
    result.output.map(|o| o.text).unwrap_or_default()
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().expect("test value")).expect("test value");
    std::fs::write(path, text).expect("test value");
}

#[tokio::test]
async fn an_agent_uses_the_reference_servers_tools_over_stdio_and_mcp_failures_are_tool_errors_alone()
 {
    let Some((modules, python)) = peers() else {
        return;
    };
    let config = tempfile::tempdir().expect("test value");
    let everything = modules.join("@modelcontextprotocol/server-everything/dist/index.js");
    let crashy = tests_dir().join("mcp/crashy_server.py");
    write(
        config.path(),
        "mcp.json",
        &json!({"mcp": {
            "everything": {"type": "local", "command": ["node", everything, "stdio"], "timeout": 30000},
            "crashy": {"type": "local", "command": [python, crashy], "timeout": 30000},
            "broken": {"type": "local", "command": ["node", everything],
                       "environment": {"TOKEN": "{env:TASKWIRE_TEST_MCP_NEVER_SET}"}},
            "off": {"type": "local", "command": ["false"], "enabled": false}
        }})
        .to_string(),
    );
    let model = ScriptedModel::start(rounds(vec![
        vec![
            (
                "echo",
                "everything_echo",
                json!({"message": "hi from the fleet"}),
            ),
            ("sum", "everything_get-sum", json!({"a": 2, "b": 3})),
            ("image", "everything_get-tiny-image", json!({})),
            ("pid1", "crashy_pid", json!({})),
            ("missing", "broken_echo", json!({"message": "x"})),
        ],
        vec![("crash", "crashy_crash", json!({}))],
        vec![("pid2", "crashy_pid", json!({}))],
    ]))
    .await;
    let cluster = cluster(config.path(), model).await;
    let out = answer(&cluster, "general", "use the tools").await;
    let line = |id: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{id} => ")))
            .unwrap_or_else(|| panic!("no {id} in {out}"))
            .to_owned()
    };
    let offered = out.lines().next().expect("test value");
    assert!(
        offered.contains("everything_echo") && offered.contains("everything_get-sum"),
        "{offered}"
    );
    assert!(
        offered.contains("crashy_crash") && offered.contains("read"),
        "{offered}"
    );
    assert!(
        !offered.contains("broken_") && !offered.contains("off_"),
        "{offered}"
    );
    assert_eq!(line("echo"), "echo => Echo: hi from the fleet");
    assert!(line("sum").contains('5'), "{out}");
    assert!(line("image").contains("[image: image/png"), "{out}");
    assert!(
        line("missing").contains("environment variable TASKWIRE_TEST_MCP_NEVER_SET is not set"),
        "{out}"
    );
    assert!(
        line("crash").contains("restarted for the next call"),
        "{out}"
    );
    let pid = |id: &str| line(id).trim_start_matches(&format!("{id} => ")).to_owned();
    assert!(pid("pid1").parse::<u32>().is_ok(), "{out}");
    assert!(pid("pid2").parse::<u32>().is_ok(), "{out}");
    assert_ne!(
        pid("pid1"),
        pid("pid2"),
        "the crashed server was started again"
    );
}

#[tokio::test]
async fn a_streamable_http_server_built_with_the_official_sdk_answers_fails_and_times_out_clearly()
{
    let Some((_, python)) = peers() else {
        return;
    };
    let (_server, url) = http_server(&python).await;
    let config = tempfile::tempdir().expect("test value");
    write(
        config.path(),
        "mcp.json",
        &json!({"mcp": {"remote": {"type": "remote", "url": url, "timeout": 2000}}}).to_string(),
    );
    let model = ScriptedModel::start(rounds(vec![
        vec![
            ("add", "remote_add", json!({"a": 2, "b": 3})),
            (
                "fail",
                "remote_fail",
                json!({"reason": "the tracker is down"}),
            ),
        ],
        vec![("slow", "remote_sleep", json!({"seconds": 10}))],
        vec![("after", "remote_shout", json!({"text": "still here"}))],
    ]))
    .await;
    let cluster = cluster(config.path(), model).await;
    let out = answer(&cluster, "general", "use the remote tools").await;
    assert!(out.contains("add => 5"), "{out}");
    assert!(
        out.contains("fail => ") && out.contains("the tracker is down"),
        "{out}"
    );
    assert!(
        out.contains("slow => ") && out.contains("timed out after 2s"),
        "{out}"
    );
    assert!(out.contains("after => STILL HERE"), "{out}");
}

#[tokio::test]
async fn a_denied_server_is_never_offered_and_a_parents_deny_bounds_its_child() {
    let Some((modules, _)) = peers() else {
        return;
    };
    let config = tempfile::tempdir().expect("test value");
    let everything = modules.join("@modelcontextprotocol/server-everything/dist/index.js");
    write(
        config.path(),
        "mcp.json",
        &json!({"mcp": {"everything": {"type": "local", "command": ["node", everything, "stdio"], "timeout": 30000}}})
            .to_string(),
    );
    write(
        config.path(),
        "agents/guarded.md",
        "---\ndescription: no everything\nmode: primary\npermission:\n  \"everything_*\": deny\n---\nYou delegate.\n",
    );
    let model = ScriptedModel::start(|req: &SeenRequest| {
        let child = req
            .first_user_message()
            .unwrap_or_default()
            .starts_with("child:");
        match (child, req.assistant_turns()) {
            (false, 0) => ScriptedReply::tool_calls([
                ("own", "everything_echo", json!({"message": "x"})),
                (
                    "t1",
                    "task",
                    json!({"description": "echo", "prompt": "child: echo", "subagent_type": "general"}),
                ),
            ]),
            (true, 0) => {
                ScriptedReply::tool_calls([("c", "everything_echo", json!({"message": "x"}))])
            }
            (true, _) => ScriptedReply::text(format!(
                "child offered {}; c => {}",
                req.tools.join(","),
                req.tool_result("c")
            )),
            (false, _) => ScriptedReply::text(format!(
                "parent offered {}; own => {}; child => {}",
                req.tools.join(","),
                req.tool_result("own"),
                req.tool_result("t1")
            )),
        }
    })
    .await;
    let cluster = cluster(config.path(), model).await;
    let out = answer(&cluster, "guarded", "delegate").await;
    let parent = out.split("; own =>").next().expect("test value");
    assert!(!parent.contains("everything_"), "{out}");
    assert!(
        out.contains("own => ")
            && out.contains("MCP server everything are not available to agent guarded"),
        "{out}"
    );
    assert!(
        out.contains("child offered")
            && out.contains("MCP server everything are not available to agent general"),
        "{out}"
    );
    assert!(!out.contains("Echo: x"), "{out}");
}

/// Runs `tests/mcp/client.py` (the official Python SDK's client) with `args` and the
/// `calls`; its JSON report.
async fn python_client(
    python: &Path,
    args: &[String],
    calls: serde_json::Value,
) -> serde_json::Value {
    let out = tokio::process::Command::new(python)
        .arg(tests_dir().join("mcp/client.py"))
        .args(["--calls", &calls.to_string(), "--timeout", "120"])
        .args(args)
        .output()
        .await
        .expect("client.py");
    assert!(
        out.status.success(),
        "client.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("client.py prints json")
}

#[tokio::test]
async fn the_official_python_client_drives_taskwire_mcp_and_the_coordinators_mcp_endpoint() {
    use std::io::Write as _;
    let Some((_, python)) = peers() else {
        return;
    };
    let taskwire = taskwire_e2e::process::Taskwire::locate().expect("taskwire binary");
    let mut tokens = tempfile::NamedTempFile::new().expect("tokens file");
    writeln!(
        tokens,
        "[[token]]\ntoken = \"acme-secret\"\ntenant = \"acme\"\nscopes = [\"*\"]\n\n\
         [[token]]\ntoken = \"globex-secret\"\ntenant = \"globex\"\nscopes = [\"*\"]\n"
    )
    .expect("write tokens");
    let path = tokens.path().to_owned();
    let http = taskwire_e2e::process::free_addr().expect("free port");
    let model = ScriptedModel::start(|req: &SeenRequest| {
        ScriptedReply::text(format!(
            "done: {}",
            req.first_user_message().unwrap_or_default()
        ))
    })
    .await;
    let cluster = start_with(model, 1, 2, move |c| {
        c.auth_tokens_file = Some(path);
        c.http_listen = http;
    })
    .await
    .expect("cluster");
    let submit = |prompt: &str| json!({"tool": "submit_task", "arguments": {"agent": "general", "prompt": prompt, "wait": true, "wait_seconds": 60}});

    // stdio: `taskwire mcp`, as a local harness starts it.
    let stdio = python_client(
        &python,
        &[
            "stdio".into(),
            "--".into(),
            taskwire.bin().display().to_string(),
            "mcp".into(),
            "--addr".into(),
            cluster.url(),
            "--token".into(),
            "acme-secret".into(),
        ],
        json!([{"tool": "list_agents", "arguments": {}}, submit("over stdio")]),
    )
    .await;
    let names: Vec<&str> = stdio["tools"]
        .as_array()
        .expect("test value")
        .iter()
        .map(|t| t["name"].as_str().expect("test value"))
        .collect();
    assert_eq!(
        names,
        [
            "submit_task",
            "get_task",
            "list_agents",
            "cancel_task",
            "answer_approval"
        ]
    );
    assert!(
        stdio["results"][0]["text"]
            .as_str()
            .expect("test value")
            .contains("\"explore\""),
        "{stdio}"
    );
    let done = &stdio["results"][1]["structured"];
    assert_eq!(done["status"], "TASK_STATUS_COMPLETED", "{stdio}");
    assert_eq!(done["result"]["output"], "done: over stdio", "{stdio}");
    let acme_task = done["task_id"].as_str().expect("test value").to_owned();

    // Streamable HTTP: `/mcp` on the coordinator's HTTP listener, with a token.
    let url = format!("http://{http}/mcp");
    let over_http = python_client(
        &python,
        &[
            "http".into(),
            url.clone(),
            "--bearer".into(),
            "acme-secret".into(),
        ],
        json!([submit("over http"), {"tool": "get_task", "arguments": {"task_id": acme_task}}]),
    )
    .await;
    assert_eq!(
        over_http["results"][0]["structured"]["result"]["output"], "done: over http",
        "{over_http}"
    );
    assert_eq!(
        over_http["results"][1]["structured"]["task_id"],
        acme_task.as_str(),
        "{over_http}"
    );

    // Another tenant's token does not see acme's task; no token is refused.
    let globex = python_client(
        &python,
        &[
            "http".into(),
            url.clone(),
            "--bearer".into(),
            "globex-secret".into(),
        ],
        json!([{"tool": "get_task", "arguments": {"task_id": acme_task}}]),
    )
    .await;
    assert_eq!(globex["results"][0]["is_error"], true, "{globex}");
    assert!(
        globex["results"][0]["text"]
            .as_str()
            .expect("test value")
            .starts_with("NOT_FOUND"),
        "{globex}"
    );
    let refused = tokio::process::Command::new(&python)
        .arg(tests_dir().join("mcp/client.py"))
        .args(["http", &url])
        .output()
        .await
        .expect("client.py");
    assert!(
        !refused.status.success(),
        "a client without a token is refused"
    );
}

#[tokio::test]
async fn a_childs_crashing_server_fails_only_that_call_and_the_parent_gets_the_childs_answer() {
    let Some((_, python)) = peers() else {
        return;
    };
    let config = tempfile::tempdir().expect("test value");
    let crashy = tests_dir().join("mcp/crashy_server.py");
    write(
        config.path(),
        "mcp.json",
        &json!({"mcp": {"crashy": {"type": "local", "command": [python, crashy], "timeout": 30000}}})
            .to_string(),
    );
    let model = ScriptedModel::start(|req: &SeenRequest| {
        let child = req
            .first_user_message()
            .unwrap_or_default()
            .starts_with("child:");
        match (child, req.assistant_turns()) {
            (false, 0) => ScriptedReply::tool_calls([(
                "t1",
                "task",
                json!({"description": "crash it", "prompt": "child: crash it", "subagent_type": "general"}),
            )]),
            (false, _) => ScriptedReply::text(format!("parent got: {}", req.tool_result("t1"))),
            (true, 0) => ScriptedReply::tool_calls([("crash", "crashy_crash", json!({}))]),
            (true, 1) => ScriptedReply::tool_calls([("pid", "crashy_pid", json!({}))]),
            (true, _) => ScriptedReply::text(format!(
                "crash => {} | pid => {}",
                req.tool_result("crash"),
                req.tool_result("pid")
            )),
        }
    })
    .await;
    let cluster = cluster(config.path(), model).await;
    let parent = cluster.submit("general", "delegate").await.expect("submit");
    let task = wait_for(&cluster, &parent, "finished", |t| t.result.is_some())
        .await
        .expect("parent finished");
    let result = task.result.expect("result");
    assert_eq!(result.status(), pb::TaskStatus::Completed, "{result:?}");
    let out = result.output.map(|o| o.text).unwrap_or_default();
    assert!(out.contains("restarted for the next call"), "{out}");
    let pid = out
        .split("pid => ")
        .nth(1)
        .map(|rest| rest.lines().next().unwrap_or_default().trim().to_owned())
        .unwrap_or_default();
    assert!(
        pid.parse::<u32>().is_ok(),
        "the restarted server answered: {out}"
    );
    let children = cluster.children(&parent).await.expect("children");
    assert_eq!(children.len(), 1, "one child, started once");
    assert_eq!(
        children[0].attempt, 1,
        "the child ran once: {:?}",
        children[0]
    );
}

/// Starts `tests/mcp/http_server.py` on a free port; the process (killed on drop) and
/// its `/mcp` URL.
async fn http_server(python: &Path) -> (tokio::process::Child, String) {
    let mut server = tokio::process::Command::new(python)
        .arg(tests_dir().join("mcp/http_server.py"))
        .args(["--port", "0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("http server");
    use tokio::io::AsyncBufReadExt;
    let stdout = server.stdout.take().expect("test value");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("server ready in time")
        .expect("test value")
        .expect("ready line");
    let url = ready.strip_prefix("ready ").expect("ready URL").to_owned();
    (server, url)
}

#[tokio::test]
async fn an_ask_on_the_filesystem_servers_write_waits_for_approval_and_its_calls_are_progress_and_provenance()
 {
    let Some((modules, _)) = peers() else {
        return;
    };
    let config = tempfile::tempdir().expect("test value");
    let filesystem = modules.join("@modelcontextprotocol/server-filesystem/dist/index.js");
    write(
        config.path(),
        "mcp.json",
        &json!({"mcp": {"files": {"type": "local", "command": ["node", filesystem, "."], "timeout": 30000}}})
            .to_string(),
    );
    write(
        config.path(),
        "agents/careful.md",
        "---\ndescription: asks before writing\nmode: primary\npermission:\n  files_write_file: ask\n---\nYou write notes.\n",
    );
    let model = ScriptedModel::start(rounds(vec![
        vec![(
            "w",
            "files_write_file",
            json!({"path": "notes.txt", "content": "written through MCP\n"}),
        )],
        vec![("r", "files_read_text_file", json!({"path": "notes.txt"}))],
    ]))
    .await;
    let cluster = cluster(config.path(), model).await;
    let mut client = cluster.client().await.expect("client");
    let id = cluster
        .submit("careful", "write the notes")
        .await
        .expect("submit");
    let asked = cluster.approval_asked(&id).await.expect("approval asked");
    assert_eq!(asked.permission, "files_write_file");
    wait_for(&cluster, &id, "awaiting_approval", |t| {
        t.status() == pb::TaskStatus::AwaitingApproval
    })
    .await
    .expect("awaiting approval");
    client
        .approve(pb::ApproveRequest {
            task_id: id.clone(),
            request_id: asked.request_id,
            answer: pb::ApprovalAnswer::Once as i32,
            message: String::new(),
        })
        .await
        .expect("approve");
    let events = cluster.watch(&id).await.expect("watch to the end");
    let finished_calls: Vec<String> = tool_events(&events)
        .into_iter()
        .filter(|(_, state)| *state == pb::ToolCallState::Completed)
        .map(|(tool, _)| tool)
        .collect();
    let result = final_result(&events).expect("result").clone();
    assert_eq!(result.status(), pb::TaskStatus::Completed, "{result:?}");
    let out = result
        .output
        .as_ref()
        .map(|o| o.text.clone())
        .unwrap_or_default();
    assert!(out.contains("r => written through MCP"), "{out}");
    assert_eq!(
        finished_calls,
        ["files_write_file", "files_read_text_file"],
        "each MCP call is a tool call event"
    );
    assert_eq!(
        created_in_patch(&result.patch, "notes.txt").as_deref(),
        Some("written through MCP"),
        "the local server wrote in the task's workspace: {}",
        result.patch
    );
    let mcp: Vec<&str> = result
        .provenance
        .iter()
        .filter(|p| p.source == "mcp")
        .map(|p| p.uri.as_str())
        .collect();
    assert_eq!(
        mcp,
        [
            r#"files_write_file {"content":"written through MCP\n","path":"notes.txt"}"#,
            r#"files_read_text_file {"path":"notes.txt"}"#
        ],
        "{:?}",
        result.provenance
    );
}

#[tokio::test]
async fn cancelling_a_task_ends_its_running_mcp_call_and_the_shared_server_serves_the_next_task() {
    let Some((_, python)) = peers() else {
        return;
    };
    let (_server, url) = http_server(&python).await;
    let config = tempfile::tempdir().expect("test value");
    write(
        config.path(),
        "mcp.json",
        &json!({"mcp": {"remote": {"type": "remote", "url": url, "timeout": 120000}}}).to_string(),
    );
    let model = ScriptedModel::start(|req: &SeenRequest| {
        let slow = req
            .first_user_message()
            .unwrap_or_default()
            .starts_with("slow");
        match (slow, req.assistant_turns()) {
            (true, 0) => {
                ScriptedReply::tool_calls([("s", "remote_sleep", json!({"seconds": 600}))])
            }
            (false, 0) => {
                ScriptedReply::tool_calls([("u", "remote_shout", json!({"text": "next"}))])
            }
            _ => ScriptedReply::text(format!("u => {}", req.tool_result("u"))),
        }
    })
    .await;
    let cluster = cluster(config.path(), model).await;
    let mut client = cluster.client().await.expect("client");
    let slow = cluster
        .submit("general", "slow: sleep")
        .await
        .expect("submit");
    let mut stream = client
        .watch(pb::WatchRequest {
            task_id: slow.clone(),
        })
        .await
        .expect("watch")
        .into_inner();
    tokio::time::timeout(taskwire_e2e::PATIENCE, async {
        while let Some(ev) = stream.next().await {
            if let Some(pb::watch_event::Event::Progress(p)) = ev.expect("event").event
                && let Some(pb::task_progress::Event::ToolCall(c)) = p.event
                && c.tool == "remote_sleep"
                && c.state() == pb::ToolCallState::Running
            {
                return;
            }
        }
        panic!("the watch ended before the call ran")
    })
    .await
    .expect("the call runs");
    let cancelled_at = std::time::Instant::now();
    client
        .cancel(pb::CancelRequest {
            task_id: slow.clone(),
            reason: "no longer needed".into(),
        })
        .await
        .expect("cancel");
    let task = wait_for(&cluster, &slow, "cancelled with a result", |t| {
        t.result.is_some()
    })
    .await
    .expect("cancelled");
    assert_eq!(task.status(), pb::TaskStatus::Cancelled);
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(20),
        "the running call did not hold the cancel: {:?}",
        cancelled_at.elapsed()
    );
    let out = answer(&cluster, "general", "then shout").await;
    assert_eq!(out, "u => NEXT");
}

#[tokio::test]
async fn a_tool_a_server_adds_and_announces_is_offered_to_the_next_session() {
    let Some((_, python)) = peers() else {
        return;
    };
    let (_server, url) = http_server(&python).await;
    let config = tempfile::tempdir().expect("test value");
    write(
        config.path(),
        "mcp.json",
        &json!({"mcp": {"remote": {"type": "remote", "url": url}}}).to_string(),
    );
    let model = ScriptedModel::start(|req: &SeenRequest| {
        let first = req
            .first_user_message()
            .unwrap_or_default()
            .starts_with("grow");
        match (first, req.assistant_turns()) {
            (true, 0) => ScriptedReply::tool_calls([("g", "remote_grow", json!({"name": "late"}))]),
            (false, 0) => ScriptedReply::tool_calls([("l", "remote_late", json!({}))]),
            (true, _) => ScriptedReply::text(format!(
                "offered {}; g => {}",
                req.tools.join(","),
                req.tool_result("g")
            )),
            (false, _) => ScriptedReply::text(format!(
                "offered {}; l => {}",
                req.tools.join(","),
                req.tool_result("l")
            )),
        }
    })
    .await;
    let cluster = cluster(config.path(), model).await;
    let first = answer(&cluster, "general", "grow a tool").await;
    assert!(first.contains("g => added late"), "{first}");
    assert!(
        !first.contains("remote_late"),
        "a session's tools are those listed as it started: {first}"
    );
    let next = answer(&cluster, "general", "use the new tool").await;
    assert!(next.contains("remote_late"), "{next}");
    assert!(next.ends_with("l => grown late"), "{next}");
}
