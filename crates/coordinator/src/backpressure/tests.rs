//! The backlog sampler against a real Postgres and nats-server: coordinators share one
//! sample instead of each reading the streams, and an idle fleet samples seldom until
//! a submit comes.

use std::time::Duration;

use futures::StreamExt as _;
use taskwire_bus::{BusConfig, NatsOptions, Subjects};
use taskwire_store::Store;
use taskwire_test_support::{NatsServer, TestDatabase};

use super::*;

struct Setup {
    _db: TestDatabase,
    nats: NatsServer,
    store: Store,
    subjects: Subjects,
    shutdown: CancellationToken,
}

async fn setup() -> Setup {
    let db = TestDatabase::create().await.expect("test database");
    let nats = NatsServer::start().expect("nats-server");
    let store = Store::connect(db.url(), 2).await.expect("store");
    let subjects = Subjects::new("sampletest");
    let bus = connect(&nats, &subjects, "setup").await;
    let cfg = BusConfig {
        subjects: subjects.clone(),
        ..BusConfig::default()
    };
    bus.ensure_streams(&cfg).await.expect("streams");
    Setup {
        _db: db,
        nats,
        store,
        subjects,
        shutdown: CancellationToken::new(),
    }
}

async fn connect(nats: &NatsServer, subjects: &Subjects, name: &str) -> Bus {
    Bus::connect(&nats.url(), name, &NatsOptions::default(), subjects.clone())
        .await
        .expect("bus")
}

/// Starts a sampler on a connection of its own, as a coordinator would.
async fn start_sampler(s: &Setup, name: &str) -> QueueDepth {
    let depth = QueueDepth::default();
    let sources = Sources {
        bus: connect(&s.nats, &s.subjects, name).await,
        tasks_stream: s.subjects.tasks_stream(),
        results_stream: s.subjects.results_stream(),
        store: s.store.clone(),
        window: false,
        outbox_cap: 1_000,
    };
    tokio::spawn(run(sources, depth.clone(), s.shutdown.clone()));
    depth
}

/// Every read of the results stream's info, as it is requested (core NATS hands a
/// copy of each request to this listener too).
async fn stream_reads(s: &Setup) -> async_nats::Subscriber {
    let bus = connect(&s.nats, &s.subjects, "listener").await;
    let subject = format!("$JS.API.STREAM.INFO.{}", s.subjects.results_stream());
    let reads = bus.client().subscribe(subject).await.expect("subscribe");
    bus.client().flush().await.expect("flush");
    reads
}

/// How many reads arrive within `window`.
async fn count_within(reads: &mut async_nats::Subscriber, window: Duration) -> usize {
    let until = tokio::time::Instant::now() + window;
    let mut n = 0;
    while tokio::time::timeout_at(until, reads.next()).await.is_ok() {
        n += 1;
    }
    n
}

#[tokio::test]
async fn coordinators_take_one_shared_sample_instead_of_each_reading_the_streams() {
    let s = setup().await;
    // One result waiting: a backlog, so the samplers run at the busy pace.
    let publisher = connect(&s.nats, &s.subjects, "publisher").await;
    publisher
        .js()
        .publish(format!("{}.results.x", s.subjects.prefix()), "r".into())
        .await
        .expect("publish")
        .await
        .expect("stored");
    let mut reads = stream_reads(&s).await;
    let depths = [
        start_sampler(&s, "c1").await,
        start_sampler(&s, "c2").await,
        start_sampler(&s, "c3").await,
    ];
    // Past the first samples (each coordinator samples once as it starts).
    tokio::time::sleep(Duration::from_millis(500)).await;
    while tokio::time::timeout(Duration::ZERO, reads.next())
        .await
        .is_ok()
    {}

    let window = Duration::from_secs(3);
    let n = count_within(&mut reads, window).await;
    // Alone, each would read every 100 to 150 ms: 60 to 90 reads between the three.
    let alone = 3 * (window.as_millis() / (SAMPLE + JITTER).as_millis()) as usize;
    let one = (window.as_millis() / SAMPLE.as_millis()) as usize;
    assert!(n >= 10, "the fleet sampled {n} times in {window:?}");
    assert!(
        n <= one + 5,
        "{n} reads in {window:?}: more than one sampler's {one} (alone, {alone} or more)"
    );
    for depth in &depths {
        assert_eq!(
            depth.backlog().results,
            1,
            "every coordinator has the sample"
        );
    }
    s.shutdown.cancel();
}

#[tokio::test]
async fn an_idle_fleet_samples_seldom_and_a_submit_brings_the_next_sample_near() {
    let s = setup().await;
    let mut reads = stream_reads(&s).await;
    let depth = start_sampler(&s, "c1").await;
    // The first sample, at start.
    tokio::time::timeout(Duration::from_secs(5), reads.next())
        .await
        .expect("a first sample");

    // Nothing in any stage and no submit: a sample a second at most.
    let window = Duration::from_millis(2_500);
    let idle = count_within(&mut reads, window).await;
    assert!(
        (1..=3).contains(&idle),
        "{idle} samples in {window:?} while idle"
    );

    // Right after an idle sample, a submit: the next comes within the busy pace, not a
    // second later.
    tokio::time::timeout(Duration::from_secs(5), reads.next())
        .await
        .expect("an idle sample");
    let submitted = tokio::time::Instant::now();
    depth.submitted();
    tokio::time::timeout(Duration::from_secs(5), reads.next())
        .await
        .expect("a sample after the submit");
    let after = submitted.elapsed();
    assert!(
        after < IDLE_SAMPLE / 2,
        "the submit's sample came {after:?} after it"
    );
    s.shutdown.cancel();
}
