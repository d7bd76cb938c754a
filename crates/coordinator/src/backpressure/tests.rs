//! The backlog sampler against a real Postgres and nats-server: coordinators share one
//! sample instead of each reading the streams, and an idle fleet samples seldom until
//! a submit comes.

use std::time::Duration;

use crate::fixture::Fixture;
use futures::StreamExt as _;

use super::*;

struct Setup {
    fixture: Fixture,
    shutdown: CancellationToken,
}

async fn setup() -> Setup {
    Setup {
        fixture: Fixture::start("sampletest", 2).await,
        shutdown: CancellationToken::new(),
    }
}

/// Starts a sampler on a connection of its own, as a coordinator would.
async fn start_sampler(s: &Setup, name: &str) -> QueueDepth {
    let depth = QueueDepth::default();
    let sources = Sources {
        bus: s.fixture.connect(name).await,
        tasks_stream: s.fixture.subjects.tasks_stream(),
        results_stream: s.fixture.subjects.results_stream(),
        store: s.fixture.store.clone(),
        window: false,
        outbox_cap: 1_000,
    };
    tokio::spawn(run(sources, depth.clone(), s.shutdown.clone()));
    depth
}

/// Every read of the results stream's info, as it is requested (core NATS hands a
/// copy of each request to this listener too).
async fn stream_reads(s: &Setup) -> async_nats::Subscriber {
    let bus = s.fixture.connect("listener").await;
    let subject = format!(
        "$JS.API.STREAM.INFO.{}",
        s.fixture.subjects.results_stream()
    );
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
    let publisher = s.fixture.connect("publisher").await;
    publisher
        .js()
        .publish(
            format!("{}.results.x", s.fixture.subjects.prefix()),
            "r".into(),
        )
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
