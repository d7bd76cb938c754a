//! One task's usage, the same in every view: a parent whose own calls (two steps and its
//! title) spend 330 tokens and whose two `explore` children spend 220 each is shown as
//! own 330, subtree 770 by `taskwire submit --wait` (the result), `get`, `ls`,
//! `watch --tree` and the dashboard's API (the tree's nodes and the live feed's results),
//! and each child as own 220, subtree 220 (`TaskUsage`, the one definition). And
//! `ls --output json` lists each task's attempts, empty only for a task never claimed.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde_json::{Value, json};
use taskwire_e2e::process::{Taskwire, free_addr, http_get};
use taskwire_e2e::{Cluster, start_with};
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

const PROMPT: &str = "parent: look twice";

/// The view of `submit --wait`: the root's result.
const SUBMITTED: &str = "submit --wait (the result)";

fn is_title(req: &SeenRequest) -> bool {
    req.messages.first().is_some_and(|m| {
        m.role == "system" && m.content == taskwire_definitions::builtin::title().prompt
    })
}

/// The parent's three calls (a step asking for two children, its answer, its title)
/// report 100 in and 10 out each; each child answers in one call of 200 in, 20 out.
fn script(req: &SeenRequest) -> ScriptedReply {
    if is_title(req) {
        return ScriptedReply::text("Two looks around").with_usage(100, 10);
    }
    let user = req.first_user_message().unwrap_or_default().to_owned();
    if user.starts_with("child:") {
        return ScriptedReply::text(format!("looked: {user}")).with_usage(200, 20);
    }
    let look = |id: &str, what: &str| {
        (
            id.to_owned(),
            "task",
            json!({"description": format!("look at {what}"), "prompt": format!("child: {what}"), "subagent_type": "explore"}),
        )
    };
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([look("c1", "one"), look("c2", "two")]).with_usage(100, 10),
        _ => ScriptedReply::text("both looked").with_usage(100, 10),
    }
}

/// Input and output tokens, own then subtree: what each view says of one task.
type Shown = ((u64, u64), (u64, u64));

fn tokens(v: &Value) -> (u64, u64) {
    let n = |key: &str| v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}"));
    (n("input_tokens"), n("output_tokens"))
}

/// `own 330, subtree 770 tokens` (the text views' label) as totals.
fn totals(s: &Shown) -> String {
    let ((oi, oo), (si, so)) = *s;
    format!("own {}, subtree {} tokens", oi + oo, si + so)
}

async fn cluster(http: SocketAddr) -> Cluster {
    let mut cluster = start_with(ScriptedModel::start(script).await, 0, 1, move |c| {
        c.http_listen = http;
    })
    .await
    .expect("cluster");
    // The parent and both children at once; titles on, so the parent makes a call no
    // step reports.
    cluster.add_worker_with("w", 3, |c| c.titles = true);
    cluster
}

#[tokio::test]
async fn every_view_shows_a_trees_usage_as_the_same_own_and_subtree() {
    let http = free_addr().expect("free port");
    let cluster = cluster(http).await;
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let url = cluster.url();
    // `taskwire ARGS --addr URL`: its stdout, and stderr to explain a failure.
    let run = |name: &'static str, args: Vec<String>| {
        let taskwire = &taskwire;
        let url = url.clone();
        async move {
            let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
            args.extend(["--addr", &url]);
            let p = taskwire.run(name, &args, &[]).await.expect(name);
            (p.stdout(), p.stderr())
        }
    };
    let json_of = |(out, err): (String, String)| -> Value {
        serde_json::from_str(out.trim())
            .unwrap_or_else(|e| panic!("one JSON value ({e}):\n{out}\n{err}"))
    };

    // The result, as `submit --wait` prints it.
    let submitted = json_of(
        run(
            "submit",
            [
                "submit", "--agent", "general", "--wait", "--output", "json", PROMPT,
            ]
            .map(str::to_owned)
            .to_vec(),
        )
        .await,
    );
    assert_eq!(submitted["status"], "completed", "{submitted}");
    let root = submitted["task_id"].as_str().expect("task id").to_owned();
    let children = cluster.children(&root).await.expect("children");
    assert_eq!(children.len(), 2, "{children:?}");
    let ids: Vec<String> = std::iter::once(root.clone())
        .chain(children.iter().map(|c| c.task_id.clone()))
        .collect();
    for id in &ids {
        let t = cluster.wait_finished(id).await.expect("finished");
        assert_eq!(t.status(), pb::TaskStatus::Completed, "{t:?}");
    }

    // What happened: the parent's own calls, each child's, all added up.
    let mut expected: BTreeMap<String, Shown> = BTreeMap::new();
    expected.insert(root.clone(), ((300, 30), (700, 70)));
    for c in &children {
        expected.insert(c.task_id.clone(), ((200, 20), (200, 20)));
    }
    assert_eq!(
        cluster.model.requests().len(),
        5,
        "three calls of the parent's, one per child"
    );

    let mut views: BTreeMap<&str, BTreeMap<String, Shown>> = BTreeMap::new();
    views.insert(
        SUBMITTED,
        BTreeMap::from([(
            root.clone(),
            (tokens(&submitted["own_usage"]), tokens(&submitted["usage"])),
        )]),
    );

    // `get --output json`: the task, and its result.
    let (mut get, mut get_result) = (BTreeMap::new(), BTreeMap::new());
    let mut get_attempts = BTreeMap::new();
    for id in &ids {
        let v = json_of(
            run(
                "get",
                vec!["get".into(), "--output".into(), "json".into(), id.clone()],
            )
            .await,
        );
        get.insert(id.clone(), (tokens(&v["usage"]), tokens(&v["subtree"])));
        get_result.insert(
            id.clone(),
            (
                tokens(&v["result"]["own_usage"]),
                tokens(&v["result"]["usage"]),
            ),
        );
        get_attempts.insert(id.clone(), v["attempts"].clone());
    }
    views.insert("get --output json", get);
    views.insert("get --output json (its result)", get_result);

    // `ls --output json`: the same numbers, and the attempts `get` lists.
    let trace = submitted["trace_id"].as_str().expect("trace id").to_owned();
    let listed = json_of(
        run(
            "ls",
            vec![
                "ls".into(),
                "--trace".into(),
                trace,
                "--output".into(),
                "json".into(),
            ],
        )
        .await,
    );
    let rows = listed.as_array().expect("a list");
    assert_eq!(rows.len(), 3, "{listed}");
    let (mut ls, mut ls_result) = (BTreeMap::new(), BTreeMap::new());
    for row in rows {
        let id = row["task_id"].as_str().expect("id").to_owned();
        assert_eq!(row["attempt"], 1, "{row}");
        let attempts = row["attempts"].as_array().expect("attempts listed");
        assert_eq!(
            attempts.len(),
            1,
            "a task that ran lists its attempt: {row}"
        );
        assert_eq!(attempts[0]["status"], "completed", "{row}");
        assert_eq!(attempts[0]["worker_id"], "w", "{row}");
        assert_eq!(
            row["attempts"], get_attempts[&id],
            "ls and get list the same attempts"
        );
        ls.insert(id.clone(), (tokens(&row["usage"]), tokens(&row["subtree"])));
        ls_result.insert(
            id,
            (
                tokens(&row["result"]["own_usage"]),
                tokens(&row["result"]["usage"]),
            ),
        );
    }
    views.insert("ls --output json", ls);
    views.insert("ls --output json (each result)", ls_result);

    // The dashboard's API: the tree's nodes, and the results on its live feed (what
    // the page draws each node from).
    let (code, body) = http_get(http, &format!("/v1/tasks/{root}/tree"))
        .await
        .expect("tree");
    assert_eq!(code, 200, "{body}");
    let tree: Value = serde_json::from_str(&body).expect("tree json");
    let (mut nodes, mut node_results) = (BTreeMap::new(), BTreeMap::new());
    for t in tree["tasks"].as_array().expect("tasks") {
        let id = t["task_id"].as_str().expect("id").to_owned();
        assert_eq!(t["worker"], "w", "{t}");
        nodes.insert(id.clone(), (tokens(&t["usage"]), tokens(&t["subtree"])));
        node_results.insert(
            id,
            (
                tokens(&t["result"]["own_usage"]),
                tokens(&t["result"]["usage"]),
            ),
        );
    }
    views.insert("dashboard tree", nodes);
    views.insert("dashboard tree (each result)", node_results);
    // The finished tree's feed replays every event, then each result, then ends.
    let (code, feed) = http_get(http, &format!("/v1/tasks/{root}/events"))
        .await
        .expect("events");
    assert_eq!(code, 200, "{feed}");
    let mut feed_results = BTreeMap::new();
    for line in feed.lines() {
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let ev: Value = serde_json::from_str(data.trim()).expect("an event");
        if ev["type"] == "result" {
            let r = &ev["result"];
            let id = ev["task_id"].as_str().expect("id").to_owned();
            feed_results.insert(id, (tokens(&r["own_usage"]), tokens(&r["usage"])));
        }
    }
    views.insert("dashboard events (results)", feed_results);

    // Every JSON view: the same numbers for every task (`submit --wait` shows the
    // root's result only).
    let root_only = BTreeMap::from([(root.clone(), expected[&root])]);
    for (view, shown) in &views {
        let wanted = if *view == SUBMITTED {
            &root_only
        } else {
            &expected
        };
        assert_eq!(
            shown, wanted,
            "{view} disagrees (own, subtree as (in, out)); every view: {views:#?}"
        );
    }

    // The text views: `get`'s lines and result line, the terminal tree's last frame.
    let (root_text, _) = run("get-text", vec!["get".into(), root.clone()]).await;
    for line in [
        "usage     in 300, out 30 tokens, unpriced\n".to_owned(),
        "subtree   in 700, out 70 tokens, unpriced\n".to_owned(),
        format!(
            "result    completed (attempt 1, 2 steps, {})\n",
            totals(&expected[&root])
        ),
    ] {
        assert!(
            root_text.contains(&line),
            "missing `{line}` in:\n{root_text}"
        );
    }
    // util-linux `script` runs `watch --tree` on a pseudo-terminal: it draws the tree.
    let command = format!(
        "{} watch --tree {root} --addr {url}",
        taskwire.bin().display()
    );
    let mut watch = taskwire
        .spawn_program("script", &["-qfec", &command, "/dev/null"])
        .expect("script");
    let status = tokio::time::timeout(taskwire_e2e::PATIENCE, watch.wait())
        .await
        .expect("watch ends in time")
        .expect("watch exits");
    let out = watch.stdout();
    assert!(status.success(), "{out}\n{}", watch.stderr());
    let last = out.rsplit("\x1b[J").next().expect("a frame");
    for (id, s) in &expected {
        let short = &id[id.len() - 8..];
        let node = last
            .lines()
            .find(|l| l.contains(short))
            .unwrap_or_else(|| panic!("{id} drawn in:\n{last}"));
        assert!(node.contains("[completed]"), "{last}");
        assert!(
            node.trim_end().ends_with(&format!("· {}", totals(s))),
            "the tree shows {id} as {}:\n{last}",
            totals(s)
        );
    }
    assert!(
        last.contains(&format!(
            "result: completed (attempt 1, 2 steps, {})",
            totals(&expected[&root])
        )),
        "{last}"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn ls_lists_each_tasks_attempts_and_an_empty_list_only_for_a_task_never_claimed() {
    let http = free_addr().expect("free port");
    let mut cluster = start_with(ScriptedModel::echo().await, 0, 1, move |c| {
        c.http_listen = http;
    })
    .await
    .expect("cluster");
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let url = cluster.url();
    let ls = || async {
        let p = taskwire
            .run("ls", &["ls", "--output", "json", "--addr", &url], &[])
            .await
            .expect("taskwire ls");
        let rows: Value = serde_json::from_str(p.stdout().trim()).expect("json");
        rows.as_array().expect("a list").clone()
    };
    // No worker yet: the task waits, never claimed.
    let id = cluster.submit("general", "hello").await.expect("submit");
    let rows = ls().await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["status"], "queued", "{rows:?}");
    assert_eq!(rows[0]["attempts"], json!([]), "none yet: {rows:?}");

    cluster.add_worker("w", 1);
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    let rows = ls().await;
    let attempts = rows[0]["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 1, "{rows:?}");
    assert_eq!(attempts[0]["attempt"], 1);
    assert_eq!(attempts[0]["status"], "completed");
    assert_eq!(attempts[0]["worker_id"], "w");
    assert!(attempts[0]["finished_at"].is_string(), "{rows:?}");
    let get = taskwire
        .run(
            "get",
            &["get", "--output", "json", "--addr", &url, &id],
            &[],
        )
        .await
        .expect("taskwire get");
    let got: Value = serde_json::from_str(get.stdout().trim()).expect("json");
    assert_eq!(
        rows[0]["attempts"], got["attempts"],
        "ls lists what get lists"
    );
    // The dashboard's list rows carry the worker, from the same attempts.
    let (code, body) = http_get(http, "/v1/tasks").await.expect("list");
    assert_eq!(code, 200, "{body}");
    let listed: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(listed["tasks"][0]["worker"], "w", "{listed}");
    cluster.shutdown().await;
}
