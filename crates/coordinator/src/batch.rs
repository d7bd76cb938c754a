//! Group commit: the submit batcher's loop is the bus's [`Batcher`] (workers batch
//! their claims with the same loop).

pub use taskwire_bus::batch::Batcher;
