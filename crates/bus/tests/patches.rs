//! The patch bucket against a real nats-server: large patches go in and come back
//! whole, and a reference that no longer names its patch is an error naming it.

use taskwire_bus::patches::{PatchError, Patches};
use taskwire_bus::{BusConfig, Subjects, ensure_streams};
use taskwire_protocol::{MAX_PATCH_BYTES, PatchRef};
use taskwire_test_support::NatsServer;

async fn bucket(nats: &NatsServer) -> Patches {
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let js = async_nats::jetstream::new(client);
    let subjects = Subjects::new("pt");
    ensure_streams(
        &js,
        &BusConfig {
            subjects: subjects.clone(),
            ..BusConfig::default()
        },
    )
    .await
    .expect("streams and bucket");
    Patches::new(js, &subjects)
}

/// About 1.5 MiB of patch text: more than one NATS message holds.
fn large_patch() -> String {
    let mut patch = String::from("diff --git a/big.txt b/big.txt\nnew file mode 100644\n");
    for i in 0..200_000 {
        patch.push_str(&format!("+line {i}\n"));
    }
    patch
}

#[tokio::test]
async fn a_patch_larger_than_a_message_is_put_and_read_back_whole() {
    let nats = NatsServer::start().expect("nats-server");
    let patches = bucket(&nats).await;
    let patch = large_patch();
    assert!(patch.len() > 1024 * 1024);
    let reference = patches.put("result", "t1", &patch).await.expect("put");
    assert_eq!(reference.size, patch.len() as u64);
    assert!(
        reference.name.starts_with("result/t1/"),
        "{}",
        reference.name
    );
    assert_eq!(patches.get(&reference).await.expect("get"), patch);

    // Each put is a new object: the first one is still there.
    let again = patches.put("result", "t1", &patch).await.expect("put");
    assert_ne!(again.name, reference.name);
    assert_eq!(patches.get(&reference).await.expect("get"), patch);
}

#[tokio::test]
async fn a_deleted_object_is_missing_and_a_wrong_digest_or_size_is_corrupt() {
    let nats = NatsServer::start().expect("nats-server");
    let patches = bucket(&nats).await;
    let reference = patches
        .put("start", "t2", "diff --git a/x b/x\n")
        .await
        .expect("put");

    let wrong_digest = PatchRef {
        sha256: "0".repeat(64),
        ..reference.clone()
    };
    let err = patches.get(&wrong_digest).await.expect_err("wrong digest");
    assert!(matches!(err, PatchError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains(&reference.name), "{err}");
    assert!(!err.is_retryable());

    let wrong_size = PatchRef {
        size: reference.size + 1,
        ..reference.clone()
    };
    let err = patches.get(&wrong_size).await.expect_err("wrong size");
    assert!(matches!(err, PatchError::Corrupt { .. }), "{err}");

    patches.delete(&reference).await.expect("delete");
    let err = patches.get(&reference).await.expect_err("deleted");
    assert!(matches!(err, PatchError::Missing { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains(&reference.name)
            && message.contains(&reference.sha256)
            && message.contains("PT_PATCHES")
            && message.contains("deleted or has expired"),
        "{message}"
    );

    let never = PatchRef {
        name: "start/t2/never-put".into(),
        ..reference
    };
    let err = patches.get(&never).await.expect_err("never put");
    assert!(matches!(err, PatchError::Missing { .. }), "{err}");
}

#[tokio::test]
async fn a_patch_over_the_cap_is_refused_before_anything_is_stored() {
    let nats = NatsServer::start().expect("nats-server");
    let patches = bucket(&nats).await;
    let huge = "x".repeat(usize::try_from(MAX_PATCH_BYTES).expect("fits") + 1);
    let err = patches
        .put("result", "t3", &huge)
        .await
        .expect_err("too large");
    assert!(matches!(err, PatchError::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains("67108864"), "{err}");
}

#[tokio::test]
async fn without_the_coordinators_bucket_a_put_is_a_retryable_error_naming_it() {
    let nats = NatsServer::start().expect("nats-server");
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let patches = Patches::new(async_nats::jetstream::new(client), &Subjects::new("none"));
    let err = patches
        .put("result", "t4", "x")
        .await
        .expect_err("no bucket");
    assert!(err.is_retryable(), "{err}");
    assert!(err.to_string().contains("NONE_PATCHES"), "{err}");
}
