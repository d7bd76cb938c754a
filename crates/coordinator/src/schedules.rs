//! Schedules: a task submitted on a cron or interval cadence, in a time zone, once per
//! tick whatever the number of coordinators.
//!
//! - [`timing`]: when a schedule ticks and which due ticks a pass fires (pure);
//! - [`spec`]: a schedule's spec checked where it enters, stored, and shown;
//! - [`scheduler`]: the loop every coordinator runs, and a trigger;
//! - [`service`]: the schedule RPCs.

pub mod scheduler;
pub mod service;
pub mod spec;
pub mod timing;
