//! The Helm chart (`charts/taskwire`) against the real thing: its KEDA trigger names
//! the stream and durable consumer that a worker started with the chart's environment
//! creates, as KEDA reads them from nats-server's `/jsz`; its workers hold no
//! database credentials and have no network path to Postgres; and the definitions
//! its values carry are what the coordinator reads from the mounted directory.
//!
//! Needs Helm: `$TASKWIRE_HELM`, else `helm` on `PATH` (`scripts/deploy-tools.sh`
//! installs it). Without it these tests fail when `CI` is set and are skipped otherwise.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;
use taskwire_e2e::PATIENCE;
use taskwire_e2e::process::{Taskwire, free_addr, http_get};
use taskwire_test_support::NatsServer;

/// Helm, or `None` (after saying so) when it is missing outside CI.
fn helm() -> Option<PathBuf> {
    let helm =
        std::env::var_os("TASKWIRE_HELM").map_or_else(|| PathBuf::from("helm"), PathBuf::from);
    match Command::new(&helm).arg("version").output() {
        Ok(out) if out.status.success() => Some(helm),
        outcome => {
            let why = format!(
                "helm ({}) is not available: {outcome:?}; install it with scripts/deploy-tools.sh \
                 and set TASKWIRE_HELM",
                helm.display()
            );
            assert!(std::env::var_os("CI").is_none(), "{why}");
            eprintln!("skipping: {why}");
            None
        }
    }
}

fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/taskwire")
}

/// `helm template` of the chart with `args` (`--set ...`, `-f ...`): its documents.
fn render(helm: &Path, args: &[&str]) -> anyhow::Result<Vec<Value>> {
    let home = tempfile::tempdir()?;
    let out = Command::new(helm)
        .args(["template", "tw"])
        .arg(chart_dir())
        .args(args)
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .output()
        .context("failed to run helm template")?;
    if !out.status.success() {
        bail!(
            "helm template {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8(out.stdout)?;
    let mut docs = Vec::new();
    for doc in serde_norway::Deserializer::from_str(&text) {
        let value = Value::deserialize(doc).context("helm template printed invalid YAML")?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// The one document of `kind` whose name ends with `suffix`.
fn find<'a>(docs: &'a [Value], kind: &str, suffix: &str) -> &'a Value {
    let found: Vec<_> = docs
        .iter()
        .filter(|d| {
            d["kind"] == kind
                && d["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with(suffix))
        })
        .collect();
    assert_eq!(found.len(), 1, "one {kind} *{suffix} expected: {found:#?}");
    found[0]
}

fn container(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]["containers"][0]
}

/// The container's environment: plain values, and `valueFrom` entries as their JSON.
fn env_of(deployment: &Value) -> BTreeMap<String, Value> {
    container(deployment)["env"]
        .as_array()
        .expect("an env list")
        .iter()
        .map(|e| {
            let name = e["name"].as_str().expect("env name").to_owned();
            let value = e
                .get("value")
                .cloned()
                .unwrap_or_else(|| e["valueFrom"].clone());
            (name, value)
        })
        .collect()
}

/// What KEDA's nats-jetstream scaler reads: `/jsz?acc=ACCOUNT&consumers=true&config=true`
/// on the monitoring endpoint, then the account (by id or name), the stream and the
/// consumer by name. Returns the consumer's lag (`num_pending + num_ack_pending`), or
/// `None` when the stream or consumer does not exist.
async fn keda_lag(
    endpoint: &str,
    account: &str,
    stream: &str,
    consumer: &str,
) -> anyhow::Result<Option<(u64, Vec<String>)>> {
    let addr = endpoint
        .parse()
        .context("monitoring endpoint is host:port")?;
    let (status, body) = http_get(
        addr,
        &format!("/jsz?acc={account}&consumers=true&config=true"),
    )
    .await?;
    anyhow::ensure!(status == 200, "/jsz answered {status}: {body}");
    let jsz: Value = serde_json::from_str(&body).context("/jsz is JSON")?;
    let accounts = jsz["account_details"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(account) = accounts
        .iter()
        .find(|a| a["id"] == account || a["name"] == account)
    else {
        return Ok(None);
    };
    let streams = account["stream_detail"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(stream) = streams.iter().find(|s| s["name"] == stream) else {
        return Ok(None);
    };
    let consumers = stream["consumer_detail"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names = consumers
        .iter()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect();
    let Some(found) = consumers.iter().find(|c| c["name"] == consumer) else {
        return Ok(None);
    };
    let count = |key: &str| found[key].as_u64().unwrap_or_default();
    Ok(Some((
        count("num_pending") + count("num_ack_pending"),
        names,
    )))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keda_trigger_names_the_stream_and_consumer_a_worker_started_from_the_chart_creates() {
    let Some(helm) = helm() else { return };
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let monitoring = free_addr().expect("a free port");
    let nats = NatsServer::start_with_args(["-m", &monitoring.port().to_string()])
        .expect("nats-server with monitoring");
    // A prefix with characters the stream name must replace, and a queue of its own.
    let endpoint = monitoring.to_string();
    let docs = render(
        &helm,
        &[
            "--set",
            "prefix=tw-chart.e2e",
            "--set",
            "queue=gpu-a",
            "--set",
            "autoscaling.keda.enabled=true",
            "--set",
            &format!("nats.monitoringEndpoint={endpoint}"),
        ],
    )
    .expect("renders");
    let trigger = &find(&docs, "ScaledObject", "-worker")["spec"]["triggers"][0];
    assert_eq!(trigger["type"], "nats-jetstream");
    let meta = |key: &str| {
        trigger["metadata"][key]
            .as_str()
            .unwrap_or_else(|| panic!("trigger metadata {key}: {trigger:#?}"))
            .to_owned()
    };
    let (stream, consumer, account) = (meta("stream"), meta("consumer"), meta("account"));
    assert_eq!(meta("natsServerMonitoringEndpoint"), endpoint);

    // Nothing exists before a worker starts: the names are not the server's by chance.
    assert_eq!(
        keda_lag(&endpoint, &account, &stream, &consumer)
            .await
            .expect("/jsz"),
        None
    );

    // A worker with the chart's environment, where it does not name cluster paths.
    let worker = find(&docs, "Deployment", "-worker");
    let workspace = tempfile::tempdir().expect("workspace");
    let http = free_addr().expect("a free port");
    let mut env: Vec<(String, String)> = env_of(worker)
        .into_iter()
        .filter_map(|(name, value)| value.as_str().map(|v| (name, v.to_owned())))
        .collect();
    let local = [
        ("TASKWIRE_NATS_URL", nats.url()),
        ("TASKWIRE_HTTP_LISTEN", http.to_string()),
        (
            "TASKWIRE_WORKSPACE",
            workspace.path().to_string_lossy().into_owned(),
        ),
        ("HOME", workspace.path().to_string_lossy().into_owned()),
        ("TASKWIRE_WORKER_ID", "chart-worker".to_owned()),
    ];
    for (name, value) in &local {
        env.retain(|(n, _)| n != name);
        env.push(((*name).to_owned(), value.clone()));
    }
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let args: Vec<String> = container(worker)["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string args").to_owned())
        .collect();
    assert_eq!(args, ["worker"], "the role is the subcommand");
    // The streams are the coordinator's to create, from the same prefix the workers
    // get; the worker then creates its queue's consumer.
    let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.expect("nats"));
    taskwire_bus::ensure_streams(
        &js,
        &taskwire_bus::BusConfig {
            subjects: taskwire_bus::Subjects::new(&env_value(&env, "TASKWIRE_PREFIX")),
            ..Default::default()
        },
    )
    .await
    .expect("streams");
    let mut process = taskwire
        .spawn_with_env("chart-worker", &["worker"], &env_refs)
        .expect("worker starts");

    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        process.check_running().expect("worker runs");
        if matches!(http_get(http, "/readyz").await, Ok((200, _))) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "worker not ready: {}",
            process.tail(20)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (lag, consumers) = keda_lag(&endpoint, &account, &stream, &consumer)
        .await
        .expect("/jsz")
        .unwrap_or_else(|| {
            panic!("KEDA would find no {stream}/{consumer} in account {account}: the chart names something else")
        });
    assert_eq!(
        consumers,
        std::slice::from_ref(&consumer),
        "the stream's only consumer"
    );
    assert_eq!(lag, 0);
    assert_eq!(stream, "TW_CHART_E2E_TASKS");

    // With the worker gone, queued tasks are lag on exactly that consumer.
    assert!(process.terminate().await.expect("stops").success());
    let client = async_nats::connect(nats.url()).await.expect("connects");
    let js = async_nats::jetstream::new(client);
    let subject = taskwire_bus::Subjects::new(&env_value(&env, "TASKWIRE_PREFIX"))
        .tasks(&env_value(&env, "TASKWIRE_QUEUE"));
    for i in 0..3 {
        js.publish(subject.clone(), format!("task {i}").into())
            .await
            .expect("publish")
            .await
            .expect("stored");
    }
    let (lag, _) = keda_lag(&endpoint, &account, &stream, &consumer)
        .await
        .expect("/jsz")
        .expect("still there");
    assert_eq!(lag, 3, "KEDA's lag counts the queued tasks");
}

fn env_value(env: &[(String, String)], name: &str) -> String {
    env.iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("{name} is not in the chart's worker env"))
}

/// Ports a NetworkPolicy's egress rules allow; `None` stands for a rule without ports
/// (every port).
fn egress_ports(policy: &Value) -> Vec<Option<i64>> {
    let mut ports = Vec::new();
    for rule in policy["spec"]["egress"].as_array().expect("egress rules") {
        match rule["ports"].as_array() {
            Some(list) => ports.extend(list.iter().map(|p| p["port"].as_i64())),
            None => ports.push(None),
        }
    }
    ports
}

#[test]
fn workers_hold_no_database_credentials_and_no_network_path_to_postgres() {
    let Some(helm) = helm() else { return };
    let full = chart_dir().join("ci/full-values.yaml");
    let full = full.to_str().expect("utf-8 path");
    for args in [vec![], vec!["-f", full]] {
        let docs = render(&helm, &args).expect("renders");
        let worker = find(&docs, "Deployment", "-worker");
        let coordinator = find(&docs, "Deployment", "-coordinator");
        let database_secret = env_of(coordinator)["TASKWIRE_DATABASE_URL"]["secretKeyRef"]["name"]
            .as_str()
            .expect("the coordinator's database URL comes from a Secret")
            .to_owned();
        let worker_text = serde_json::to_string(&worker["spec"]).expect("json");
        assert!(
            !worker_text.contains("DATABASE") && !worker_text.contains(&database_secret),
            "{args:?}: the worker sees database credentials: {worker_text}"
        );

        let policy = |name: &str| find(&docs, "NetworkPolicy", name);
        let (worker_policy, coordinator_policy) = (policy("-worker"), policy("-coordinator"));
        for p in [worker_policy, coordinator_policy] {
            let types = &p["spec"]["policyTypes"];
            assert!(
                types
                    .as_array()
                    .expect("policy types")
                    .contains(&"Egress".into()),
                "{args:?}: egress is not restricted: {p:#}"
            );
        }
        let worker_ports = egress_ports(worker_policy);
        assert!(
            !worker_ports.contains(&None) && !worker_ports.contains(&Some(5432)),
            "{args:?}: a worker may reach Postgres's port: {worker_ports:?}"
        );
        assert!(
            worker_ports.contains(&Some(53)),
            "{args:?}: DNS: {worker_ports:?}"
        );
        assert!(
            egress_ports(coordinator_policy).contains(&Some(5432)),
            "{args:?}: the coordinator must reach Postgres"
        );
    }
}

#[test]
fn termination_grace_outlasts_the_drain_grace_it_is_derived_from() {
    let Some(helm) = helm() else { return };
    for (drain, margin) in [(30, 15), (300, 5)] {
        let docs = render(
            &helm,
            &[
                "--set",
                &format!("worker.drainGraceSeconds={drain}"),
                "--set",
                &format!("worker.terminationGraceMarginSeconds={margin}"),
            ],
        )
        .expect("renders");
        let worker = find(&docs, "Deployment", "-worker");
        assert_eq!(env_of(worker)["TASKWIRE_DRAIN_GRACE"], format!("{drain}s"));
        assert_eq!(
            worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"],
            drain + margin
        );
    }
}

/// The files the coordinator's definitions volume holds: each item of the volume (a
/// ConfigMap key and the path it is mounted at) with the ConfigMap's text for it.
fn definitions_files(docs: &[Value]) -> Vec<(String, String)> {
    let data = &find(docs, "ConfigMap", "-definitions")["data"];
    let coordinator = find(docs, "Deployment", "-coordinator");
    let volume = coordinator["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == "definitions")
        .expect("a definitions volume");
    volume["configMap"]["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| {
            let key = item["key"].as_str().expect("key");
            let text = data[key]
                .as_str()
                .unwrap_or_else(|| panic!("{key} in the ConfigMap"));
            (
                item["path"].as_str().expect("path").to_owned(),
                text.to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_charts_hooks_mcp_servers_and_skills_are_what_the_coordinator_reads() {
    use taskwire_definitions::{
        builtin::AgentRegistry, command::load_commands, hooks::load_hooks, loader::load_agents,
        mcp::load_mcp, skill::load_skills,
    };
    let Some(helm) = helm() else { return };
    let full = chart_dir().join("ci/full-values.yaml");
    let docs = render(&helm, &["-f", full.to_str().expect("utf-8 path")]).expect("renders");
    let dir = tempfile::tempdir().expect("tempdir");
    let files = definitions_files(&docs);
    for (path, text) in &files {
        let at = dir.path().join(path);
        std::fs::create_dir_all(at.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&at, text).expect("write");
    }
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    assert!(paths.contains(&"hooks.json"), "{paths:?}");
    assert!(
        paths.contains(&"skills/release-notes/template.md"),
        "{paths:?}"
    );

    let (hooks, errors) = load_hooks(dir.path(), Default::default());
    assert!(errors.is_empty(), "{errors:?}");
    let hook = hooks.list().first().expect("one hook");
    assert_eq!(hooks.list().len(), 1);
    assert!(hook.matches("bash"), "{hook:?}");

    let (mcp, errors) = load_mcp(dir.path(), Default::default());
    assert!(errors.is_empty(), "{errors:?}");
    let github = mcp.get("github").expect("the github server");
    assert!(!github.is_local(), "{github:?}");

    let (skills, errors) = load_skills(dir.path(), Default::default());
    assert!(errors.is_empty(), "{errors:?}");
    let skill = skills.get("release-notes").expect("the skill");
    assert_eq!(
        skill.description,
        "Writes release notes from the changes since the last tag"
    );
    assert_eq!(skill.files.len(), 1, "{:?}", skill.files);

    let (agents, errors) = load_agents(&dir.path().join("agents"), AgentRegistry::new());
    assert!(errors.is_empty(), "{errors:?}");
    assert!(agents.get(&"reviewer".parse().expect("name")).is_some());
    let (commands, errors) = load_commands(&dir.path().join("commands"));
    assert!(errors.is_empty(), "{errors:?}");
    assert!(commands.get("review").is_some());
}

#[test]
fn an_invalid_skill_name_or_a_skill_without_its_skill_md_is_refused_by_the_values_schema() {
    let Some(helm) = helm() else { return };
    for (set, why) in [
        (
            "coordinator.skills.Release_Notes.SKILL\\.md=x",
            "Release_Notes",
        ),
        ("coordinator.skills.release-notes.notes\\.md=x", "SKILL.md"),
    ] {
        let err = render(&helm, &["--set", set]).expect_err("refused");
        assert!(err.to_string().contains(why), "{set}: {err}");
    }
}

#[test]
fn the_charts_max_backlog_reaches_the_coordinator_and_an_invalid_one_is_refused() {
    let Some(helm) = helm() else { return };
    let docs = render(&helm, &[]).expect("renders");
    let coordinator = find(&docs, "Deployment", "-coordinator");
    assert!(
        !env_of(coordinator).contains_key("TASKWIRE_MAX_BACKLOG"),
        "unset: the coordinator's own default"
    );
    for limit in [0, 25_000] {
        let docs = render(
            &helm,
            &["--set", &format!("coordinator.maxBacklog={limit}")],
        )
        .expect("renders");
        let coordinator = find(&docs, "Deployment", "-coordinator");
        assert_eq!(
            env_of(coordinator)["TASKWIRE_MAX_BACKLOG"],
            limit.to_string()
        );
    }
    for (set, why) in [
        ("coordinator.maxBacklog=-1", "maxBacklog"),
        ("coordinator.maxBacklog=lots", "maxBacklog"),
    ] {
        let err = render(&helm, &["--set", set]).expect_err("refused");
        assert!(err.to_string().contains(why), "{set}: {err}");
    }
}
