//! Least-privilege NATS permissions per role, derived from the same [`Subjects`] the
//! coordinator and the workers use, with the reason for every subject.
//!
//! - [`coordinator`]: manages the streams, dispatches tasks, serves claims and worker
//!   requests in its queue group, aggregates results, dead letters and advisories.
//! - [`worker`]: pulls its queue's tasks, claims them, publishes progress and results,
//!   makes worker requests, hears cancel notices and approval decisions, follows its
//!   children's progress. It cannot dispatch tasks, answer requests, cancel or approve,
//!   nor manage streams.
//!
//! [`authorization`] renders both as a nats-server `authorization` block: the block in
//! `deploy/nats/nats-server.conf` is this rendering for the default prefix and queue.

use crate::Subjects;
use crate::subjects::{
    ADVISORIES_CONSUMER, COORDINATORS_GROUP, DEAD_LETTERS_CONSUMER, RESULTS_CONSUMER,
};

/// The environment variable nats-server reads the coordinator user's password from.
pub const COORDINATOR_PASSWORD_ENV: &str = "NATS_COORDINATOR_PASSWORD";
/// The environment variable nats-server reads the worker user's password from.
pub const WORKER_PASSWORD_ENV: &str = "NATS_WORKER_PASSWORD";

/// The prefix of the JetStream API subjects.
const API: &str = "$JS.API";
/// Where every reply arrives: request replies, JetStream API answers, publish acks and
/// pulled messages (async-nats's default inbox prefix).
const INBOX: &str = "_INBOX.>";

/// One subject a role may use, and why it needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// A subject (wildcards allowed). For subscriptions, `subject queue` allows the
    /// subscription only in that queue group.
    pub subject: String,
    pub why: &'static str,
}

/// What one role may publish and subscribe to; everything else is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permissions {
    /// Publishing, requests (JetStream API calls included) and acks.
    pub publish: Vec<Grant>,
    pub subscribe: Vec<Grant>,
    /// May answer each request it receives once, on the request's reply subject.
    pub allow_responses: bool,
}

/// Collects grants that share a reason.
#[derive(Default)]
struct Grants(Vec<Grant>);

impl Grants {
    fn allow(&mut self, why: &'static str, subjects: impl IntoIterator<Item = String>) {
        self.0
            .extend(subjects.into_iter().map(|subject| Grant { subject, why }));
    }
}

/// The JetStream API calls of an ordered consumer on the events stream: created
/// unnamed, re-created under a name (filtered to progress subjects) after a gap,
/// pulled from, looked up after a reconnect, and its predecessor deleted. The stream
/// keeps every event, so deleting a consumer there loses nothing.
fn ordered_events_consumer(s: &Subjects) -> Vec<String> {
    let events = s.events_stream();
    vec![
        format!("{API}.CONSUMER.CREATE.{events}"),
        format!("{API}.CONSUMER.CREATE.{events}.*.{}", s.progress_all()),
        format!("{API}.CONSUMER.MSG.NEXT.{events}.*"),
        format!("{API}.CONSUMER.INFO.{events}.*"),
        format!("{API}.CONSUMER.DELETE.{events}.*"),
    ]
}

/// The JetStream API calls and acks of one of the coordinators' durable consumers.
fn durable_consumer(stream: &str, consumer: &str) -> Vec<String> {
    vec![
        format!("{API}.CONSUMER.INFO.{stream}.{consumer}"),
        format!("{API}.CONSUMER.CREATE.{stream}.{consumer}"),
        format!("{API}.CONSUMER.MSG.NEXT.{stream}.{consumer}"),
        format!("$JS.ACK.{stream}.{consumer}.>"),
    ]
}

/// Putting and getting objects in the patch bucket (see [`crate::patches`]): look the
/// bucket up, read an object's description (direct get), publish chunks and
/// descriptions, and read an object's chunks through an ordered push consumer, which
/// is created unnamed, deleted when re-created after a gap, and answers the server's
/// flow control. Not the bucket's stream itself: no create, update, purge or delete.
fn patch_objects(s: &Subjects) -> Vec<String> {
    let stream = s.patches_stream();
    let mut subjects = vec![
        format!("{API}.STREAM.INFO.{stream}"),
        format!("{API}.DIRECT.GET.{stream}.>"),
        format!("{API}.CONSUMER.CREATE.{stream}"),
        format!("{API}.CONSUMER.DELETE.{stream}.*"),
        format!("$JS.FC.{stream}.>"),
    ];
    subjects.extend(s.patches_objects());
    subjects
}

/// Reading, watching and compare-and-setting the models' rate budgets in the limits
/// bucket (see [`crate::limits`]): look the bucket up, get a key (direct get), put a
/// key, and watch every key through an ordered push consumer. Not the bucket's stream.
fn limit_budgets(s: &Subjects) -> Vec<String> {
    let stream = s.limits_stream();
    vec![
        format!("{API}.STREAM.INFO.{stream}"),
        format!("{API}.DIRECT.GET.{stream}.>"),
        format!("{API}.CONSUMER.CREATE.{stream}"),
        format!("{API}.CONSUMER.CREATE.{stream}.>"),
        format!("{API}.CONSUMER.DELETE.{stream}.*"),
        format!("$JS.FC.{stream}.>"),
        s.limits_keys(),
    ]
}

/// What a coordinator may do.
pub fn coordinator(s: &Subjects) -> Permissions {
    let streams = [
        s.tasks_stream(),
        s.events_stream(),
        s.results_stream(),
        s.advisories_stream(),
        s.dead_letter_stream(),
        s.patches_stream(),
        s.limits_stream(),
    ];
    let mut publish = Grants::default();
    publish.allow(
        "create the streams, the patch bucket and the limits bucket or update them to this coordinator's settings; sample the queue depth",
        streams.iter().flat_map(|stream| {
            ["INFO", "CREATE", "UPDATE"].map(|call| format!("{API}.STREAM.{call}.{stream}"))
        }),
    );
    publish.allow(
        "read the workers' consumers' pending counts (the queued-tasks gauge)",
        [format!("{API}.CONSUMER.INFO.{}.*", s.tasks_stream())],
    );
    publish.allow(
        "read and remove a task message that reached its max deliveries",
        ["MSG.GET", "MSG.DELETE"].map(|call| format!("{API}.STREAM.{call}.{}", s.tasks_stream())),
    );
    publish.allow(
        "aggregate results through the coordinators' durable consumer",
        durable_consumer(&s.results_stream(), RESULTS_CONSUMER),
    );
    publish.allow(
        "record dead letters reported by workers",
        durable_consumer(&s.dead_letter_stream(), DEAD_LETTERS_CONSUMER),
    );
    publish.allow(
        "handle max-deliveries advisories kept in the advisories stream",
        durable_consumer(&s.advisories_stream(), ADVISORIES_CONSUMER),
    );
    publish.allow(
        "replay a task's progress for Watch (ordered consumer on the events stream)",
        ordered_events_consumer(s),
    );
    publish.allow(
        "find a task's last progress event, where a Watch's replay ends",
        [format!("{API}.STREAM.MSG.GET.{}", s.events_stream())],
    );
    publish.allow(
        "read large result patches to record them; hand a large recorded patch to a parent's worker",
        patch_objects(s)
            .into_iter()
            .filter(|subject| !subject.starts_with(&format!("{API}.STREAM.INFO."))),
    );
    publish.allow("dispatch tasks (the outbox relay)", [s.tasks_all()]);
    publish.allow("tell running sessions to stop", [s.cancel_all()]);
    publish.allow(
        "send approval decisions to the waiting worker",
        [s.approval_all()],
    );
    publish.allow(
        "wake watchers and waiting parents when a task is finished",
        [s.finished_all()],
    );
    publish.allow(
        "share its sample of the fleet's backlog with the other coordinators",
        [s.backlog()],
    );

    let mut subscribe = Grants::default();
    subscribe.allow(
        "replies to its JetStream API calls, publish acks and pulled messages",
        [INBOX.to_owned()],
    );
    subscribe.allow(
        "serve claims and worker requests, only in the coordinators' queue group",
        [s.claim(), s.claims(), s.rpc_all()]
            .map(|subject| format!("{subject} {COORDINATORS_GROUP}")),
    );
    subscribe.allow("end a Watch when its task is finished", [s.finished_all()]);
    subscribe.allow(
        "take the other coordinators' samples of the backlog instead of sampling",
        [s.backlog()],
    );
    Permissions {
        publish: publish.0,
        subscribe: subscribe.0,
        allow_responses: true,
    }
}

/// What a worker serving `queue` may do.
pub fn worker(s: &Subjects, queue: &str) -> Permissions {
    let tasks = s.tasks_stream();
    let consumer = s.workers_consumer(queue);
    let mut publish = Grants::default();
    publish.allow(
        "check at start that the streams it uses exist (the coordinator creates them)",
        [
            s.tasks_stream(),
            s.events_stream(),
            s.results_stream(),
            s.dead_letter_stream(),
        ]
        .map(|stream| format!("{API}.STREAM.INFO.{stream}")),
    );
    publish.allow(
        "find its queue's shared durable consumer, or create it with this queue's filter",
        [
            format!("{API}.CONSUMER.INFO.{tasks}.{consumer}"),
            format!(
                "{API}.CONSUMER.CREATE.{tasks}.{consumer}.{}",
                s.tasks(queue)
            ),
        ],
    );
    publish.allow(
        "pull tasks from that consumer",
        [format!("{API}.CONSUMER.MSG.NEXT.{tasks}.{consumer}")],
    );
    publish.allow(
        "ack, nak, terminate or extend (in-progress ack) its pulled tasks",
        [format!("$JS.ACK.{tasks}.{consumer}.>")],
    );
    publish.allow(
        "claim pulled tasks (a request to the coordinators, one claim or a batch)",
        [s.claim(), s.claims()],
    );
    publish.allow(
        "worker requests: child submits, task lookups, session load and save, approvals",
        [s.rpc_all()],
    );
    publish.allow("publish progress events", [s.progress_all()]);
    publish.allow("publish results", [s.results_all()]);
    publish.allow("report a malformed task message", [s.dead_letters()]);
    publish.allow(
        "follow a child's progress (ordered consumer on the events stream)",
        ordered_events_consumer(s),
    );
    publish.allow(
        "put and get patches too large for a message in the patch bucket (not manage the bucket)",
        patch_objects(s),
    );
    publish.allow(
        "share the models' rate budgets with the fleet in the limits bucket (not manage the bucket)",
        limit_budgets(s),
    );

    let mut subscribe = Grants::default();
    subscribe.allow(
        "replies to its requests and JetStream API calls, publish acks and pulled tasks",
        [INBOX.to_owned()],
    );
    subscribe.allow("cancel notices for its running sessions", [s.cancel_all()]);
    subscribe.allow(
        "approval decisions for its waiting sessions",
        [s.approval_all()],
    );
    subscribe.allow("learn that a child task finished", [s.finished_all()]);
    Permissions {
        publish: publish.0,
        subscribe: subscribe.0,
        allow_responses: false,
    }
}

/// A nats-server `authorization` block with the users `coordinator` and `worker` (the
/// latter serving `queue`), their passwords read from [`COORDINATOR_PASSWORD_ENV`] and
/// [`WORKER_PASSWORD_ENV`], each reason written as a comment above its subjects.
pub fn authorization(s: &Subjects, queue: &str) -> String {
    let mut out = String::new();
    out.push_str("authorization {\n  users: [\n");
    user(
        &mut out,
        "coordinator",
        COORDINATOR_PASSWORD_ENV,
        &coordinator(s),
    );
    user(&mut out, "worker", WORKER_PASSWORD_ENV, &worker(s, queue));
    out.push_str("  ]\n}\n");
    out
}

fn user(out: &mut String, name: &str, password_env: &str, p: &Permissions) {
    out.push_str(&format!(
        "    {{\n      user: {name}\n      password: ${password_env}\n      permissions: {{\n"
    ));
    for (block, grants) in [("publish", &p.publish), ("subscribe", &p.subscribe)] {
        out.push_str(&format!("        {block}: {{\n          allow: [\n"));
        let mut why = "";
        for grant in grants {
            if grant.why != why {
                why = grant.why;
                out.push_str(&format!("            # {why}\n"));
            }
            out.push_str(&format!("            \"{}\"\n", grant.subject));
        }
        out.push_str("          ]\n        }\n");
    }
    if p.allow_responses {
        out.push_str("        # answer each claim and worker request once, on its reply subject\n");
        out.push_str("        allow_responses: true\n");
    }
    out.push_str("      }\n    }\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subjects_of(grants: &[Grant]) -> Vec<&str> {
        grants.iter().map(|g| g.subject.as_str()).collect()
    }

    #[test]
    fn a_worker_may_not_dispatch_answer_cancel_approve_or_manage_streams() {
        let s = Subjects::default();
        let w = worker(&s, "default");
        let publish = subjects_of(&w.publish);
        for forbidden in [
            s.tasks_all(),
            s.tasks("default"),
            s.cancel_all(),
            s.approval_all(),
            s.finished_all(),
        ] {
            assert!(!publish.contains(&forbidden.as_str()), "{forbidden}");
        }
        assert!(
            !publish.iter().any(|p| p.contains(".STREAM.CREATE.")
                || p.contains(".STREAM.UPDATE.")
                || p.contains(".STREAM.DELETE.")
                || p.contains(".STREAM.PURGE.")
                || p.contains(".STREAM.MSG.")
                || p.starts_with("$JS.API.>")),
            "{publish:?}"
        );
        let subscribe = subjects_of(&w.subscribe);
        assert!(
            !subscribe.iter().any(|s| s.contains(".worker.")
                || s.contains(".rpc.")
                || s.contains(".tasks.")
                || s.contains(".results.")),
            "{subscribe:?}"
        );
        assert!(!w.allow_responses);
    }

    #[test]
    fn a_worker_may_put_and_get_patches_but_not_manage_the_patch_bucket() {
        let s = Subjects::default();
        let publish = worker(&s, "default").publish;
        let publish = subjects_of(&publish);
        for allowed in [
            "$O.TASKWIRE_PATCHES.C.>",
            "$O.TASKWIRE_PATCHES.M.>",
            "$JS.API.STREAM.INFO.OBJ_TASKWIRE_PATCHES",
            "$JS.API.DIRECT.GET.OBJ_TASKWIRE_PATCHES.>",
            "$JS.API.CONSUMER.CREATE.OBJ_TASKWIRE_PATCHES",
        ] {
            assert!(publish.contains(&allowed), "{allowed}");
        }
        for call in ["CREATE", "UPDATE", "DELETE", "PURGE"] {
            let forbidden = format!("$JS.API.STREAM.{call}.OBJ_TASKWIRE_PATCHES");
            assert!(
                !publish
                    .iter()
                    .any(|p| *p == forbidden || p.starts_with("$JS.API.STREAM.>")),
                "{forbidden}"
            );
        }
    }

    #[test]
    fn a_worker_pulls_and_acks_only_its_own_queue() {
        let s = Subjects::new("acme");
        let publish = worker(&s, "gpu").publish;
        let publish = subjects_of(&publish);
        assert!(publish.contains(&"$JS.API.CONSUMER.MSG.NEXT.ACME_TASKS.workers-gpu"));
        assert!(publish.contains(&"$JS.ACK.ACME_TASKS.workers-gpu.>"));
        assert!(publish.contains(&"$JS.API.CONSUMER.CREATE.ACME_TASKS.workers-gpu.acme.tasks.gpu"));
        assert!(!publish.iter().any(|p| p.contains("workers-default")));
    }

    #[test]
    fn coordinators_serve_requests_only_in_their_queue_group() {
        let s = Subjects::new("acme");
        let c = coordinator(&s);
        let subscribe = subjects_of(&c.subscribe);
        assert!(subscribe.contains(&"acme.rpc.claim taskwire-coordinators"));
        assert!(subscribe.contains(&"acme.worker.> taskwire-coordinators"));
        assert!(!subscribe.contains(&"acme.rpc.claim"));
        assert!(c.allow_responses);
    }

    #[test]
    fn every_subject_is_under_the_prefix_or_a_nats_system_prefix() {
        let s = Subjects::new("acme");
        for p in [coordinator(&s), worker(&s, "default")] {
            for g in p.publish.iter().chain(&p.subscribe) {
                assert!(
                    [
                        "acme.",
                        "$JS.API.",
                        "$JS.ACK.",
                        "$JS.FC.OBJ_ACME_PATCHES.",
                        "$O.ACME_PATCHES.",
                        "$JS.FC.KV_ACME_LIMITS.",
                        "$KV.ACME_LIMITS.",
                        "_INBOX."
                    ]
                    .iter()
                    .any(|prefix| g.subject.starts_with(prefix)),
                    "{}",
                    g.subject
                );
                assert!(!g.why.is_empty());
            }
        }
    }

    fn deploy_file(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../deploy/nats")
            .join(name);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("failed to read {}: {e}", path.display()))
    }

    #[test]
    fn the_committed_server_config_holds_the_rendered_permissions() {
        let config = deploy_file("nats-server.conf");
        let begin = "# BEGIN taskwire permissions (prefix taskwire, queue default)\n";
        let end = "# END taskwire permissions\n";
        let start = config.find(begin).expect("begin marker") + begin.len();
        let stop = config.find(end).expect("end marker");
        let rendered = authorization(&Subjects::default(), "default");
        assert!(
            config[start..stop] == rendered,
            "deploy/nats/nats-server.conf is out of date; replace its block with the output \
             of `cargo run -p taskwire-bus --example nats_permissions`:\n{rendered}"
        );
    }

    #[test]
    fn the_deployment_readme_explains_every_allowed_subject() {
        let readme = deploy_file("README.md");
        let s = Subjects::default();
        for p in [coordinator(&s), worker(&s, "default")] {
            for g in p.publish.iter().chain(&p.subscribe) {
                assert!(
                    readme.contains(&format!("`{}`", g.subject)),
                    "deploy/nats/README.md does not mention `{}` ({})",
                    g.subject,
                    g.why
                );
            }
        }
    }

    #[test]
    fn the_rendering_names_both_users_and_their_password_variables() {
        let text = authorization(&Subjects::default(), "default");
        assert!(text.contains("user: coordinator\n      password: $NATS_COORDINATOR_PASSWORD\n"));
        assert!(text.contains("user: worker\n      password: $NATS_WORKER_PASSWORD\n"));
        assert_eq!(text.matches("allow_responses: true").count(), 1);
        assert_eq!(text.matches('{').count(), text.matches('}').count());
    }
}
