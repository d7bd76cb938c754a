//! Prints the nats-server `authorization` block for a deployment's prefix and queue:
//!
//! ```sh
//! cargo run -p taskwire-bus --example nats_permissions -- [--prefix taskwire] [--queue default]
//! ```
//!
//! Paste it between the markers of `deploy/nats/nats-server.conf`.

use taskwire_bus::{Subjects, permissions};

fn main() {
    let mut prefix = "taskwire".to_owned();
    let mut queue = "default".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next();
        match (flag.as_str(), value) {
            ("--prefix", Some(v)) => prefix = v,
            ("--queue", Some(v)) => queue = v,
            _ => {
                eprintln!("usage: nats_permissions [--prefix PREFIX] [--queue QUEUE]");
                std::process::exit(2);
            }
        }
    }
    print!(
        "{}",
        permissions::authorization(&Subjects::new(&prefix), &queue)
    );
}
