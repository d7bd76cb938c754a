// `@taskwire/client/gen`: the modules generated from proto/taskwire/v1 (the public
// API and the envelope it uses), for what the client does not cover. The worker RPC
// messages are at `@taskwire/client/gen/taskwire/v1/worker_rpc_pb`.
export * from "./gen/taskwire/v1/envelope_pb.js";
export * from "./gen/taskwire/v1/task_service_pb.js";
