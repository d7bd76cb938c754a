//! Histogram buckets, one set per kind of quantity, all in base units (seconds,
//! tokens).

/// Task latencies (queue wait, run time, end to end): from 5 ms, for a no-op task on
/// an idle fleet, to two hours, for a long agent session or a deep queue.
pub const TASK_SECONDS: [f64; 19] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
    1800.0, 3600.0, 7200.0,
];

/// One model call, the buckets the OpenTelemetry GenAI conventions advise for
/// `gen_ai.client.operation.duration`: 10 ms doubling to 82 s.
pub const MODEL_CALL_SECONDS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// Tokens of one model call, the buckets the OpenTelemetry GenAI conventions advise
/// for `gen_ai.client.token.usage`: powers of four from 1 to 67M.
pub const TOKENS: [f64; 14] = [
    1.0,
    4.0,
    16.0,
    64.0,
    256.0,
    1024.0,
    4096.0,
    16384.0,
    65536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
];

/// One tool call: from a 1 ms file read to a 10 min command.
pub const TOOL_CALL_SECONDS: [f64; 13] = [
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0,
];

/// A schedule's lag from tick to dispatch: from milliseconds (a scheduler pass) to the
/// minutes of a catch-up.
pub const SCHEDULE_LAG_SECONDS: [f64; 14] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0,
];
