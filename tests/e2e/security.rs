//! Bearer tokens map to tenants; tenants cannot see each other's tasks; a submit's
//! scope must lie within its token's.

use std::io::Write;

use taskwire_e2e::start_with;
use taskwire_protocol::pb;
use taskwire_test_support::ScriptedModel;
use tonic::{Code, Request};

fn with_token<T>(msg: T, token: &str) -> Request<T> {
    let mut r = Request::new(msg);
    r.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("ascii"),
    );
    r
}

#[tokio::test]
async fn tenants_are_isolated_and_scopes_are_bounded_by_the_token() {
    let mut tokens = tempfile::NamedTempFile::new().expect("tokens file");
    writeln!(
        tokens,
        "[[token]]\ntoken = \"acme-secret\"\ntenant = \"acme\"\nscopes = [\"read\", \"grep\"]\n\n\
         [[token]]\ntoken = \"globex-secret\"\ntenant = \"globex\"\nscopes = [\"*\"]\n"
    )
    .expect("write tokens");
    let path = tokens.path().to_owned();
    let cluster = start_with(ScriptedModel::echo().await, 1, 2, move |c| {
        c.auth_tokens_file = Some(path)
    })
    .await
    .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let submit = || pb::SubmitRequest {
        agent: "general".into(),
        prompt: "hello".into(),
        ..Default::default()
    };

    let err = client.submit(submit()).await.expect_err("no token");
    assert_eq!(err.code(), Code::Unauthenticated);
    let err = client
        .submit(with_token(submit(), "wrong"))
        .await
        .expect_err("bad token");
    assert_eq!(err.code(), Code::Unauthenticated);

    let acme = client
        .submit(with_token(submit(), "acme-secret"))
        .await
        .expect("acme submit")
        .into_inner();
    let id = acme.task_id.clone();

    // globex cannot see, watch, cancel or replay acme's task.
    let err = client
        .get(with_token(
            pb::GetRequest {
                task_id: id.clone(),
            },
            "globex-secret",
        ))
        .await
        .expect_err("get");
    assert_eq!(err.code(), Code::NotFound);
    let err = client
        .watch(with_token(
            pb::WatchRequest {
                task_id: id.clone(),
            },
            "globex-secret",
        ))
        .await
        .expect_err("watch");
    assert_eq!(err.code(), Code::NotFound);
    let err = client
        .cancel(with_token(
            pb::CancelRequest {
                task_id: id.clone(),
                reason: String::new(),
            },
            "globex-secret",
        ))
        .await
        .expect_err("cancel");
    assert_eq!(err.code(), Code::NotFound);
    let err = client
        .replay(with_token(
            pb::ReplayRequest {
                task_id: id.clone(),
            },
            "globex-secret",
        ))
        .await
        .expect_err("replay");
    assert_eq!(err.code(), Code::NotFound);
    let listed = client
        .list(with_token(pb::ListRequest::default(), "globex-secret"))
        .await
        .expect("list")
        .into_inner();
    assert!(listed.tasks.is_empty(), "globex sees {:?}", listed.tasks);

    // acme sees its own task, run as tenant acme with the token's scope.
    let task = client
        .get(with_token(pb::GetRequest { task_id: id }, "acme-secret"))
        .await
        .expect("get")
        .into_inner();
    assert_eq!(task.tenant, "acme");
    let listed = client
        .list(with_token(pb::ListRequest::default(), "acme-secret"))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.tasks.len(), 1);

    // A scope wider than the token's, or another tenant, is refused.
    let mut wide = submit();
    wide.auth_scope = vec!["read".into(), "bash".into()];
    let err = client
        .submit(with_token(wide, "acme-secret"))
        .await
        .expect_err("wider scope");
    assert_eq!(err.code(), Code::PermissionDenied);
    assert!(err.message().contains("`bash`"), "{}", err.message());
    let mut other = submit();
    other.tenant = "globex".into();
    let err = client
        .submit(with_token(other, "acme-secret"))
        .await
        .expect_err("other tenant");
    assert_eq!(err.code(), Code::PermissionDenied);
    cluster.shutdown().await;
}
