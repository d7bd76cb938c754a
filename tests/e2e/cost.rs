//! Cost and budgets through real workers: each model call is priced from the
//! worker's catalogue (the scripted model reports its token counts), a task's own
//! cost and its subtree's come back from `Get`, a tree with `max_tokens` ends
//! `budget_exceeded` when spent and a later task continues its session, and a child
//! asked for after the tree spent its budget is refused, naming the budget.

use std::time::Duration;

use serde_json::json;
use taskwire_e2e::{Cluster, progress_events, start};
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};
use tonic::Code;

/// US dollars per million input and output tokens of the scripted model.
const INPUT_USD_PER_MTOK: f64 = 2.0;
const OUTPUT_USD_PER_MTOK: f64 = 8.0;

fn first_user(req: &SeenRequest) -> String {
    req.first_user_message().unwrap_or_default().to_owned()
}

fn last_tool_result(req: &SeenRequest) -> String {
    req.messages
        .iter()
        .rev()
        .find(|m| m.role == "tool")
        .map(|m| m.content.clone())
        .unwrap_or_default()
}

/// - `child: ...`: answers at once, reporting 1000 input and 500 output tokens
///   (`child: spend ...`: 900 and 100).
/// - `delegate ...`: asks one explore child (100 in, 10 out), then answers with what
///   it said (200 in, 20 out).
/// - `gated ...`: reads `gate.txt` until it says `open` (1 token a turn), then asks
///   for a child, then answers with what the `task` tool said.
/// - `continue`: answers from the history.
fn script(req: &SeenRequest) -> ScriptedReply {
    let user = first_user(req);
    if user.starts_with("child: spend") {
        return ScriptedReply::text("child spent its share").with_usage(900, 100);
    }
    if user.starts_with("child:") {
        return ScriptedReply::text("child done").with_usage(1000, 500);
    }
    if req.last_user_message() == Some("continue") {
        let saw_child = req
            .messages
            .iter()
            .any(|m| m.role == "tool" && m.content.contains("child spent its share"));
        return ScriptedReply::text(format!("continued; history has the child: {saw_child}"))
            .with_usage(10, 1);
    }
    let task_call = |id: &str, prompt: &str| {
        ScriptedReply::tool_calls([(
            id.to_owned(),
            "task",
            json!({"description": "delegate", "prompt": prompt, "subagent_type": "explore"}),
        )])
    };
    if user.starts_with("delegate") {
        let child_prompt = if user.contains("spend") {
            "child: spend it"
        } else {
            "child: work"
        };
        return match req.assistant_turns() {
            0 => task_call("t1", child_prompt).with_usage(100, 10),
            _ => ScriptedReply::text(format!("parent saw: {}", last_tool_result(req)))
                .with_usage(200, 20),
        };
    }
    if user.starts_with("gated") {
        let last = last_tool_result(req);
        if last.contains("open") {
            return task_call("late", "child: late").with_usage(1, 0);
        }
        if last.contains("budget") {
            return ScriptedReply::text(format!("task tool said: {last}")).with_usage(1, 0);
        }
        return ScriptedReply::tool_calls([("gate", "read", json!({"filePath": "gate.txt"}))])
            .with_usage(1, 0)
            .with_delay(Duration::from_millis(300));
    }
    ScriptedReply::text("ok").with_usage(1, 1)
}

async fn cluster() -> Cluster {
    let mut cluster = start(ScriptedModel::start(script).await, 0, 1)
        .await
        .expect("cluster");
    cluster.add_worker_with("priced", 3, |c| {
        c.models = serde_json::from_value(json!({"scripted": {
            "context_window": 128_000,
            "input_usd_per_mtok": INPUT_USD_PER_MTOK,
            "output_usd_per_mtok": OUTPUT_USD_PER_MTOK,
        }}))
        .expect("a valid catalogue");
    });
    cluster
}

fn usd(input: u64, output: u64) -> f64 {
    // The exact sum in pico-dollars, as the worker computes it, then dollars.
    let pico = input * 2_000_000 + output * 8_000_000;
    pico as f64 / 1e12
}

#[tokio::test]
async fn a_task_and_its_subtree_cost_their_tokens_at_the_catalogue_prices() {
    let cluster = cluster().await;
    let root = cluster
        .submit("general", "delegate the work")
        .await
        .expect("submit");
    let task = cluster.wait_finished(&root).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");

    // The parent's own calls: 300 in, 30 out; its child's: 1000 in, 500 out.
    let own = task.usage.expect("own usage");
    assert_eq!((own.input_tokens, own.output_tokens), (300, 30));
    assert_eq!(own.cost_usd, Some(usd(300, 30)));
    assert_eq!(own.cost_usd, Some(0.00084));
    let subtree = task.subtree_usage.expect("subtree usage");
    assert_eq!((subtree.input_tokens, subtree.output_tokens), (1300, 530));
    assert_eq!(subtree.cost_usd, Some(usd(1300, 530)));
    assert_eq!(subtree.cost_usd, Some(0.00684));
    assert_eq!(subtree.unpriced_tokens, 0);
    // The result's usage includes the descendants, with their cost.
    let result = task.result.expect("result").usage.expect("result usage");
    assert_eq!(result.cost_usd, Some(0.00684));

    let children = cluster.children(&root).await.expect("children");
    assert_eq!(children.len(), 1);
    let child = children[0].usage.expect("child usage");
    assert_eq!(child.cost_usd, Some(0.006));
    assert_eq!(children[0].subtree_usage, children[0].usage);

    // Each step's progress carries its cost.
    let events = cluster.watch(&root).await.expect("watch");
    let step_costs: Vec<Option<f64>> = progress_events(&events)
        .iter()
        .filter_map(|p| match &p.event {
            Some(pb::task_progress::Event::StepFinished(s)) => {
                Some(s.usage.and_then(|u| u.cost_usd))
            }
            _ => None,
        })
        .collect();
    assert_eq!(step_costs, vec![Some(usd(100, 10)), Some(usd(200, 20))]);

    // A model the catalogue does not price is unpriced, not free.
    let mut client = cluster.client().await.expect("client");
    let unpriced = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: "hello".into(),
            model: Some("unlisted-model".into()),
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner();
    let task = cluster
        .wait_finished(&unpriced.task_id)
        .await
        .expect("finished");
    let own = task.usage.expect("own usage");
    assert_eq!((own.cost_usd, own.unpriced_tokens), (None, 2), "{own:?}");
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_tree_that_spends_its_max_tokens_ends_budget_exceeded_and_a_later_task_continues_it() {
    let cluster = cluster().await;
    let mut client = cluster.client().await.expect("client");
    let root = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: "delegate and spend".into(),
            max_tokens: Some(1000),
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner();
    let task = cluster
        .wait_finished(&root.task_id)
        .await
        .expect("finished");
    // The root's first step (110 tokens) and its child (1000) spent the budget: the
    // root makes no second model call.
    assert_eq!(task.status(), pb::TaskStatus::BudgetExceeded, "{task:?}");
    assert_eq!(task.max_tokens, Some(1000));
    let result = task.result.clone().expect("result");
    assert_eq!(result.metrics.expect("metrics").steps, 1);
    let error = result.errors.first().expect("an error naming the budget");
    assert_eq!(error.code, "budget_exceeded");
    assert!(error.message.contains("max_tokens"), "{}", error.message);
    assert!(!error.retryable);
    let subtree = task.subtree_usage.expect("subtree usage");
    assert_eq!(subtree.input_tokens + subtree.output_tokens, 1110);
    let children = cluster.children(&root.task_id).await.expect("children");
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].status(), pb::TaskStatus::Completed);
    assert_eq!(children[0].max_tokens, Some(1000), "inherited");

    // The partial session is resumable: a later task continues it.
    let next = cluster
        .resume("general", "continue", &result.session_id)
        .await
        .expect("submit resume");
    let task = cluster.wait_finished(&next).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    assert_eq!(
        task.result.expect("result").output.expect("output").text,
        "continued; history has the child: true"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_child_asked_for_after_the_tree_spent_its_budget_is_refused_naming_the_budget() {
    let cluster = cluster().await;
    let mut client = cluster.client().await.expect("client");
    let root = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: "gated delegation".into(),
            max_tokens: Some(1000),
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner();
    // A child of the root spends the tree's budget while the root waits at its gate.
    let spender = client
        .submit(pb::SubmitRequest {
            agent: "explore".into(),
            prompt: "child: spend it all".into(),
            parent_task_id: root.task_id.clone(),
            ..Default::default()
        })
        .await
        .expect("submit child")
        .into_inner();
    let spent = cluster
        .wait_finished(&spender.task_id)
        .await
        .expect("finished");
    assert_eq!(spent.status(), pb::TaskStatus::Completed, "{spent:?}");

    // Another child now is refused, over gRPC ...
    let refused = client
        .submit(pb::SubmitRequest {
            agent: "explore".into(),
            prompt: "child: one more".into(),
            parent_task_id: root.task_id.clone(),
            ..Default::default()
        })
        .await
        .expect_err("the budget is spent");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("max_tokens"), "{refused:?}");

    // ... and through the root's `task` tool, whose model sees the refusal.
    let deadline = tokio::time::Instant::now() + taskwire_e2e::PATIENCE;
    let workspace = loop {
        if let Some(ws) = cluster.task_workspace(&root.task_id) {
            break ws;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the root never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    std::fs::write(workspace.join("gate.txt"), "open\n").expect("open the gate");
    let task = cluster
        .wait_finished(&root.task_id)
        .await
        .expect("finished");
    let text = task.result.expect("result").output.expect("output").text;
    assert!(
        text.starts_with("task tool said:") && text.contains("max_tokens budget"),
        "{text}"
    );
    let children = cluster.children(&root.task_id).await.expect("children");
    assert_eq!(children.len(), 1, "no new child started: {children:?}");
    cluster.shutdown().await;
}
