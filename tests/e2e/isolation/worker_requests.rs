//! The workers' requests to the coordinator hold the same line: a session loads and
//! saves only for the task that runs in it, of its tenant, and a task lookup answers
//! only within the asking task's tenant. Sent here as a forged worker would, straight
//! over NATS.

use prost::Message;
use taskwire_bus::Subjects;
use taskwire_protocol::pb;

use super::{ACME, GLOBEX, submit, tenants};

async fn request<R: Message + Default>(
    nats: &async_nats::Client,
    method: &str,
    body: impl Message,
) -> R {
    let reply = nats
        .request(Subjects::default().rpc(method), body.encode_to_vec().into())
        .await
        .expect("the coordinator answers");
    R::decode(reply.payload.as_ref()).expect("a reply")
}

fn code(status: Option<&pb::RpcStatus>) -> &str {
    status.map_or("", |s| s.code.as_str())
}

#[tokio::test]
async fn session_load_and_save_refuse_a_session_of_another_tenant() {
    let mut t = tenants().await;
    let acme = t
        .finished(ACME, submit("general", "acme secret plan"))
        .await;
    let globex = t.finished(GLOBEX, submit("general", "globex work")).await;
    // The globex task's current claim: the save below is refused for the session, not
    // fenced out as a stale attempt.
    let store = taskwire_store::Store::connect(t.cluster.db.url(), 1)
        .await
        .expect("store");
    let globex_id = taskwire_protocol::TaskId::parse_field("task_id", &globex.task_id).expect("id");
    let globex_epoch = store
        .get_task(globex_id)
        .await
        .expect("read")
        .expect("exists")
        .claim_epoch;
    let nats = async_nats::connect(t.cluster.nats.url())
        .await
        .expect("nats");

    let load = |task_id: &str| pb::SessionLoad {
        session_id: acme.session_id.clone(),
        task_id: task_id.into(),
    };
    let stolen: pb::SessionLoadReply = request(&nats, "session.load", load(&globex.task_id)).await;
    assert_eq!(code(stolen.status.as_ref()), "NOT_FOUND", "{stolen:?}");
    assert!(stolen.transcript_json.is_empty());
    assert!(
        !String::from_utf8_lossy(&stolen.transcript_json).contains("acme secret plan"),
        "no transcript leaked"
    );
    // The task that ran in the session loads it.
    let own: pb::SessionLoadReply = request(&nats, "session.load", load(&acme.task_id)).await;
    assert_eq!(code(own.status.as_ref()), "", "{own:?}");
    assert!(String::from_utf8_lossy(&own.transcript_json).contains("acme secret plan"));

    let overwrite = pb::SessionSave {
        session_id: acme.session_id.clone(),
        task_id: globex.task_id.clone(),
        claim_epoch: globex_epoch.0,
        transcript_json: br#"{"session_id":"x","messages":[]}"#.to_vec(),
    };
    let saved: pb::SessionSaveReply = request(&nats, "session.save", overwrite).await;
    assert_eq!(code(saved.status.as_ref()), "NOT_FOUND", "{saved:?}");
    let after: pb::SessionLoadReply = request(&nats, "session.load", load(&acme.task_id)).await;
    assert_eq!(after.transcript_json, own.transcript_json, "unchanged");
    t.stop().await;
}

#[tokio::test]
async fn task_lookup_answers_only_within_the_asking_tasks_tenant() {
    let mut t = tenants().await;
    let acme = t
        .finished(ACME, submit("general", "acme secret plan"))
        .await;
    let globex = t.finished(GLOBEX, submit("general", "globex work")).await;
    let nats = async_nats::connect(t.cluster.nats.url())
        .await
        .expect("nats");
    let lookup = |asking: &str| pb::TaskLookup {
        task_id: acme.task_id.clone(),
        asking_task_id: asking.into(),
    };
    let stolen: pb::TaskLookupReply = request(&nats, "task", lookup(&globex.task_id)).await;
    assert_eq!(code(stolen.status.as_ref()), "NOT_FOUND", "{stolen:?}");
    assert!(stolen.task.is_none());
    let own: pb::TaskLookupReply = request(&nats, "task", lookup(&acme.task_id)).await;
    assert_eq!(
        own.task.map(|t| t.task_id),
        Some(acme.task_id.clone()),
        "a task of the same tenant is found"
    );
    t.stop().await;
}
