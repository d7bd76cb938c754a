//! `taskwire watch --tree TASK_ID`: a task tree, live, in the terminal.
//!
//! The root is followed with `Watch`; every `child_task` event opens a `Watch` of that
//! child, so each node's status, current tool call and tokens stay current: a running
//! task's own tokens from its finished steps, a finished one's recorded usage, own and
//! subtree, from its result (`TaskUsage`, the numbers `taskwire get` shows). On a
//! terminal the tree is redrawn in place (the previous drawing's lines are cleared with
//! ANSI cursor codes, at most ten times a second); when stdout is not a terminal each
//! change is one plain line instead (`<task> <agent>: running`), so logs and pipes get
//! a readable record. Ends when every watched task has its result.
//!
//! [`Tree`] is the model (pure: events in, lines out); [`run`] does the IO.

use std::collections::{BTreeMap, HashSet};
use std::io::{IsTerminal, Write};
use std::time::Duration;

use taskwire_protocol::cost::TaskUsage;
use taskwire_protocol::pb;
use tokio::sync::mpsc;

use crate::commands::Client;
use crate::output::{status_name, tool_call_state_name};

/// Fastest redraw on a terminal.
const FRAME: Duration = Duration::from_millis(100);

/// One task of the tree.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Node {
    pub parent: String,
    pub agent: String,
    pub description: String,
    pub status: String,
    /// The running tool call: tool and title.
    pub tool: Option<(String, String)>,
    /// Tokens of the finished steps seen, while no result has come.
    pub live_tokens: u64,
    /// The recorded usage, own and subtree, from the result.
    pub usage: Option<TaskUsage<pb::Usage>>,
    pub finished: bool,
}

/// The tree as the events so far describe it, in the order tasks appeared.
#[derive(Debug, Default)]
pub struct Tree {
    root: String,
    nodes: BTreeMap<String, Node>,
    order: Vec<String>,
}

impl Tree {
    pub fn new(root: &str) -> Self {
        let mut tree = Self {
            root: root.to_owned(),
            ..Self::default()
        };
        tree.node(root).status = "queued".to_owned();
        tree
    }

    fn node(&mut self, id: &str) -> &mut Node {
        if !self.nodes.contains_key(id) {
            self.order.push(id.to_owned());
        }
        self.nodes.entry(id.to_owned()).or_default()
    }

    /// Applies a progress event of the tree's task `p.task_id`; returns what changed,
    /// as plain lines (empty when nothing worth a line did), and the child it
    /// introduced, if any.
    pub fn progress(&mut self, p: &pb::TaskProgress) -> (Vec<String>, Option<String>) {
        use pb::task_progress::Event;
        let mut lines = Vec::new();
        let mut child = None;
        let id = p.task_id.clone();
        let status = status_name(p.status).to_owned();
        let node = self.node(&id);
        if !node.finished && node.status != status {
            node.status.clone_from(&status);
            lines.push(status.clone());
        }
        match &p.event {
            Some(Event::StepFinished(s)) => {
                let u = s.usage.unwrap_or_default();
                node.live_tokens += u.input_tokens + u.output_tokens;
            }
            Some(Event::ToolCall(c)) if c.task_id.is_empty() || c.task_id == id => {
                let state = tool_call_state_name(c.state);
                if matches!(state, "pending" | "running") {
                    node.tool = Some((c.tool.clone(), c.title.clone()));
                } else {
                    node.tool = None;
                }
                lines.push(format!("tool {} [{state}] {}", c.tool, c.title));
            }
            Some(Event::ApprovalRequired(a)) if a.task_id.is_empty() || a.task_id == id => {
                lines.push(format!(
                    "asks for {} {} (taskwire approve {id} {} --answer once|always|reject)",
                    a.permission,
                    a.patterns.join(" "),
                    a.request_id
                ));
            }
            Some(Event::ChildTask(c)) => {
                lines.push(format!("started {} {}", c.agent, c.task_id));
                let kid = self.node(&c.task_id);
                kid.parent.clone_from(&id);
                kid.agent.clone_from(&c.agent);
                kid.description.clone_from(&c.description);
                if kid.status.is_empty() {
                    kid.status = "queued".to_owned();
                }
                child = Some(c.task_id.clone());
            }
            _ => {}
        }
        let lines = lines.into_iter().map(|l| self.line(&id, &l)).collect();
        (lines, child)
    }

    /// Applies a task's result; returns its plain line.
    pub fn result(&mut self, id: &str, r: &pb::TaskResult) -> String {
        let node = self.node(id);
        node.status = status_name(r.status).to_owned();
        node.tool = None;
        node.finished = true;
        let usage = TaskUsage::of_result(r);
        node.usage = Some(usage);
        let text = format!("{} ({})", node.status, usage.tokens_line());
        self.line(id, &text)
    }

    /// Names the root's agent and prompt (from `Get`), before events arrive.
    pub fn describe_root(&mut self, agent: &str, description: &str) {
        let root = self.root.clone();
        let node = self.node(&root);
        node.agent = agent.to_owned();
        node.description = description.to_owned();
    }

    fn line(&self, id: &str, text: &str) -> String {
        let agent = self.nodes.get(id).map_or("", |n| n.agent.as_str());
        format!("{} {agent}: {text}", short(id))
    }

    /// The tree as lines: one per task, children under their parent.
    pub fn render(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.render_node(&self.root, "", "", &mut out);
        out
    }

    fn render_node(&self, id: &str, lead: &str, branch: &str, out: &mut Vec<String>) {
        let Some(n) = self.nodes.get(id) else { return };
        let tool = n.tool.as_ref().map_or(String::new(), |(tool, title)| {
            format!("  ▶ {tool}: {title}")
        });
        let tokens = n.usage.map_or_else(
            || format!("own {} tokens so far", n.live_tokens),
            |u| u.tokens_line(),
        );
        out.push(format!(
            "{lead}{branch}{} {} [{}] {} · {tokens}{tool}",
            short(id),
            if n.agent.is_empty() { "?" } else { &n.agent },
            n.status,
            first_line(&n.description, 48),
        ));
        let kids: Vec<&String> = self
            .order
            .iter()
            .filter(|k| self.nodes.get(*k).is_some_and(|c| c.parent == id))
            .collect();
        let lead = format!(
            "{lead}{}",
            match branch {
                "" => "",
                "└─ " => "   ",
                _ => "│  ",
            }
        );
        for (i, k) in kids.iter().enumerate() {
            let branch = if i + 1 == kids.len() {
                "└─ "
            } else {
                "├─ "
            };
            self.render_node(k, &lead, branch, out);
        }
    }
}

/// The last 8 characters of an id: distinct among a tree's tasks (UUIDv7 ids share
/// their leading, time-based digits).
fn short(id: &str) -> &str {
    &id[id.len().saturating_sub(8)..]
}

fn first_line(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() > max {
        format!("{}…", line.chars().take(max - 1).collect::<String>())
    } else {
        line.to_owned()
    }
}

/// Draws frames in place on a terminal: clears the previous frame's lines first.
pub struct Screen<W: Write> {
    out: W,
    drawn: usize,
}

impl<W: Write> Screen<W> {
    pub fn new(out: W) -> Self {
        Self { out, drawn: 0 }
    }

    pub fn draw(&mut self, lines: &[String]) -> std::io::Result<()> {
        if self.drawn > 0 {
            // Up to the first line of the last frame, then clear to the end.
            write!(self.out, "\x1b[{}F\x1b[J", self.drawn)?;
        }
        for l in lines {
            writeln!(self.out, "{l}")?;
        }
        self.drawn = lines.len();
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

type Tagged = (String, Result<pb::watch_event::Event, tonic::Status>);

/// Follows `root`'s tree to its end; returns the root's result.
pub async fn run(client: &Client, root: &str) -> anyhow::Result<pb::TaskResult> {
    let mut tree = Tree::new(root);
    let task = client
        .clone()
        .get(pb::GetRequest {
            task_id: root.to_owned(),
        })
        .await?
        .into_inner();
    tree.describe_root(&task.agent, &task.prompt);
    // The root's watch is opened here, so a bad id or another tenant's task fails at once.
    let first = client
        .clone()
        .watch(pb::WatchRequest {
            task_id: root.to_owned(),
        })
        .await?
        .into_inner();
    let (tx, mut rx) = mpsc::channel::<Tagged>(256);
    tokio::spawn(forward(root.to_owned(), first, tx.clone()));
    let mut open = 1usize;
    let mut followed = HashSet::from([root.to_owned()]);
    let tty = std::io::stdout().is_terminal();
    let mut screen = Screen::new(std::io::stdout());
    let mut frame = tokio::time::interval(FRAME);
    let mut dirty = true;
    let mut root_result = None;
    loop {
        tokio::select! {
            item = rx.recv() => {
                let Some((id, event)) = item else { break };
                let lines = match event {
                    Ok(pb::watch_event::Event::Progress(p)) => {
                        let (lines, child) = tree.progress(&p);
                        if let Some(child) = child.filter(|c| followed.insert(c.clone())) {
                            let stream = client
                                .clone()
                                .watch(pb::WatchRequest { task_id: child.clone() })
                                .await?
                                .into_inner();
                            open += 1;
                            tokio::spawn(forward(child, stream, tx.clone()));
                        }
                        lines
                    }
                    Ok(pb::watch_event::Event::Result(r)) => {
                        let line = tree.result(&id, &r);
                        open -= 1;
                        if id == root {
                            root_result = Some(r);
                        }
                        vec![line]
                    }
                    Err(status) => return Err(status.into()),
                };
                if tty {
                    dirty = true;
                } else {
                    let mut out = std::io::stdout().lock();
                    for l in lines {
                        writeln!(out, "{l}")?;
                    }
                }
                if open == 0 {
                    break;
                }
            }
            _ = frame.tick(), if tty && dirty => {
                screen.draw(&tree.render())?;
                dirty = false;
            }
        }
    }
    if tty {
        screen.draw(&tree.render())?;
    }
    root_result.ok_or_else(|| {
        tonic::Status::unavailable(format!("watch of task {root} ended before its result")).into()
    })
}

/// Hands one watch's events to the tree, tagged with its task; a watch that ends
/// without a result is reported as unavailable.
async fn forward(
    task: String,
    mut stream: tonic::Streaming<pb::WatchEvent>,
    tx: mpsc::Sender<Tagged>,
) {
    loop {
        let item = match stream.message().await {
            Ok(Some(pb::WatchEvent { event: Some(e) })) => Ok(e),
            Ok(Some(_)) => continue,
            Ok(None) => Err(tonic::Status::unavailable(format!(
                "watch of task {task} ended before its result"
            ))),
            Err(status) => Err(status),
        };
        let end = !matches!(item, Ok(pb::watch_event::Event::Progress(_)));
        if tx.send((task.clone(), item)).await.is_err() || end {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(
        task: &str,
        status: pb::TaskStatus,
        event: pb::task_progress::Event,
    ) -> pb::TaskProgress {
        pb::TaskProgress {
            task_id: task.to_owned(),
            status: status as i32,
            event: Some(event),
            ..Default::default()
        }
    }

    #[test]
    fn children_are_drawn_under_their_parent_with_their_running_tool_and_tokens() {
        use pb::task_progress::Event;
        let mut tree = Tree::new("root-00000001");
        tree.describe_root("general", "do two things");
        for (kid, agent) in [("kid-00000002", "explore"), ("kid-00000003", "asker")] {
            let (_, child) = tree.progress(&progress(
                "root-00000001",
                pb::TaskStatus::Running,
                Event::ChildTask(pb::ChildTask {
                    task_id: kid.into(),
                    agent: agent.into(),
                    description: format!("{agent} work"),
                    ..Default::default()
                }),
            ));
            assert_eq!(child.as_deref(), Some(kid));
        }
        tree.progress(&progress(
            "kid-00000003",
            pb::TaskStatus::Running,
            Event::ToolCall(pb::ToolCallEvent {
                tool: "bash".into(),
                title: "write a file".into(),
                state: pb::ToolCallState::Running as i32,
                ..Default::default()
            }),
        ));
        tree.progress(&progress(
            "kid-00000002",
            pb::TaskStatus::Running,
            Event::StepFinished(pb::StepFinished {
                step: 1,
                usage: Some(pb::Usage {
                    input_tokens: 10,
                    output_tokens: 5,
                    ..Default::default()
                }),
            }),
        ));
        assert_eq!(
            tree.render(),
            vec![
                "00000001 general [running] do two things · own 0 tokens so far",
                "├─ 00000002 explore [running] explore work · own 15 tokens so far",
                "└─ 00000003 asker [running] asker work · own 0 tokens so far  ▶ bash: write a file",
            ]
        );
    }

    #[test]
    fn a_result_is_final_and_later_progress_does_not_change_the_status() {
        let mut tree = Tree::new("root-00000001");
        let line = tree.result(
            "root-00000001",
            &pb::TaskResult {
                status: pb::TaskStatus::Completed as i32,
                usage: Some(pb::Usage {
                    input_tokens: 20,
                    output_tokens: 10,
                    ..Default::default()
                }),
                own_usage: Some(pb::Usage {
                    input_tokens: 2,
                    output_tokens: 1,
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        assert_eq!(line, "00000001 : completed (own 3, subtree 30 tokens)");
        let (lines, _) = tree.progress(&progress(
            "root-00000001",
            pb::TaskStatus::Running,
            pb::task_progress::Event::Heartbeat(pb::Heartbeat {}),
        ));
        assert!(lines.is_empty(), "{lines:?}");
        assert!(tree.render()[0].contains("[completed]"));
    }

    #[test]
    fn a_finished_node_shows_its_recorded_usage_whatever_steps_were_seen() {
        use pb::task_progress::Event;
        let step = |tokens| {
            progress(
                "root-00000001",
                pb::TaskStatus::Running,
                Event::StepFinished(pb::StepFinished {
                    step: 1,
                    usage: Some(pb::Usage {
                        input_tokens: tokens,
                        ..Default::default()
                    }),
                }),
            )
        };
        let mut tree = Tree::new("root-00000001");
        tree.progress(&step(110));
        assert!(tree.render()[0].ends_with("· own 110 tokens so far"));
        let usage = |tokens| {
            Some(pb::Usage {
                input_tokens: tokens,
                ..Default::default()
            })
        };
        tree.result(
            "root-00000001",
            &pb::TaskResult {
                status: pb::TaskStatus::Completed as i32,
                own_usage: usage(330),
                usage: usage(770),
                ..Default::default()
            },
        );
        // A step the title call never had, and one replayed after the result: neither
        // adds to what was recorded.
        tree.progress(&step(110));
        assert!(
            tree.render()[0].ends_with("· own 330, subtree 770 tokens"),
            "{:?}",
            tree.render()
        );
    }

    #[test]
    fn a_redraw_clears_exactly_the_previous_frames_lines() {
        let mut screen = Screen::new(Vec::new());
        screen
            .draw(&["a".to_owned(), "b".to_owned()])
            .expect("draw");
        screen.draw(&["c".to_owned()]).expect("draw");
        let out = String::from_utf8(screen.into_inner()).expect("utf-8");
        assert_eq!(out, "a\nb\n\x1b[2F\x1b[Jc\n");
    }
}
