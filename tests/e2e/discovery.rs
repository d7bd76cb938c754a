//! Agents and commands found without flags: a coordinator started in a project reads its
//! `.taskwire/` and the user's `$XDG_CONFIG_HOME/taskwire/`, the project's over the
//! user's over the built-ins, and reloads both when they change.

use std::path::Path;
use std::time::Duration;

use taskwire_e2e::PATIENCE;
use taskwire_e2e::process::{Taskwire, free_addr, wait_serving};
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;
use taskwire_test_support::{NatsServer, TestDatabase};
use tonic::transport::Channel;

fn write(dir: &Path, file: &str, text: &str) {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// The listed agents as `(name, description)`.
async fn agents(client: &mut TaskServiceClient<Channel>) -> Vec<(String, String)> {
    client
        .list_agents(pb::ListAgentsRequest::default())
        .await
        .expect("list agents")
        .into_inner()
        .agents
        .into_iter()
        .map(|a| (a.name, a.description))
        .collect()
}

fn description<'a>(agents: &'a [(String, String)], name: &str) -> Option<&'a str> {
    agents
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, d)| d.as_str())
}

#[tokio::test]
async fn a_coordinator_started_in_a_project_lists_its_agents_over_the_users() {
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let nats = NatsServer::start().expect("nats");
    let db = TestDatabase::create().await.expect("database");
    let (project, user) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let user_dir = user.path().join("taskwire");
    write(
        project.path(),
        ".taskwire/agents/x.md",
        "---\ndescription: from the project\nmode: subagent\n---\nYou are x.\n",
    );
    write(
        project.path(),
        ".taskwire/agents/shared.md",
        "---\ndescription: the project's shared\n---\n",
    );
    write(
        project.path(),
        ".taskwire/agents/retired.md",
        "---\ndisable: true\n---\n",
    );
    write(
        &user_dir,
        "agents/y.md",
        "---\ndescription: from the user\n---\nYou are y.\n",
    );
    write(
        &user_dir,
        "agents/shared.md",
        "---\ndescription: the user's shared\n---\n",
    );
    write(
        &user_dir,
        "agents/retired.md",
        "---\ndescription: retired\n---\n",
    );

    let addr = free_addr().expect("port");
    let (nats_url, listen) = (nats.url(), addr.to_string());
    let xdg = user.path().to_string_lossy().into_owned();
    let mut coordinator = taskwire
        .spawn_in(
            "coordinator",
            project.path(),
            &[
                "coordinator",
                "--database-url",
                db.url(),
                "--nats-url",
                &nats_url,
                "--listen",
                &listen,
            ],
            &[("XDG_CONFIG_HOME", &xdg), ("RUST_LOG", "info")],
        )
        .expect("start coordinator");
    let mut client = wait_serving(&mut coordinator, addr, None)
        .await
        .expect("coordinator serving");

    let listed = agents(&mut client).await;
    assert_eq!(
        description(&listed, "x"),
        Some("from the project"),
        "{listed:?}"
    );
    assert_eq!(
        description(&listed, "y"),
        Some("from the user"),
        "{listed:?}"
    );
    assert_eq!(
        description(&listed, "shared"),
        Some("the project's shared"),
        "{listed:?}"
    );
    assert_eq!(description(&listed, "retired"), None, "{listed:?}");
    assert!(description(&listed, "build").is_some(), "{listed:?}");

    // Both directories are watched: an agent added to the user's appears.
    write(
        &user_dir,
        "agents/later.md",
        "---\ndescription: added later\n---\n",
    );
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let listed = agents(&mut client).await;
        if description(&listed, "later") == Some("added later") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new user agent never appeared: {listed:?}\n{}",
            coordinator.tail(20)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    coordinator.terminate().await.expect("coordinator stops");
}
