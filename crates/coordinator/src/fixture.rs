//! What the coordinator's own tests run against: a fresh database and nats-server, a
//! store, and a bus with the streams made, under a test's own prefix.

use taskwire_bus::{Bus, BusConfig, NatsOptions, Subjects};
use taskwire_store::Store;
use taskwire_test_support::{NatsServer, TestDatabase};

pub(crate) struct Fixture {
    pub _db: TestDatabase,
    pub nats: NatsServer,
    pub store: Store,
    pub bus: Bus,
    pub subjects: Subjects,
}

impl Fixture {
    /// The servers, a store of `connections`, and the streams under `prefix`.
    pub async fn start(prefix: &str, connections: u32) -> Self {
        let db = TestDatabase::create().await.expect("test database");
        let nats = NatsServer::start().expect("nats-server");
        let store = Store::connect(db.url(), connections).await.expect("store");
        let subjects = Subjects::new(prefix);
        let bus = Self::connect_to(&nats, &subjects, prefix).await;
        let cfg = BusConfig {
            subjects: subjects.clone(),
            ..BusConfig::default()
        };
        bus.ensure_streams(&cfg).await.expect("streams");
        Self {
            _db: db,
            nats,
            store,
            bus,
            subjects,
        }
    }

    /// Another connection to the same nats-server, named `name`.
    pub async fn connect(&self, name: &str) -> Bus {
        Self::connect_to(&self.nats, &self.subjects, name).await
    }

    async fn connect_to(nats: &NatsServer, subjects: &Subjects, name: &str) -> Bus {
        Bus::connect(&nats.url(), name, &NatsOptions::default(), subjects.clone())
            .await
            .expect("bus")
    }
}
