"""The modules generated from taskwire's protos at build time (``envelope_pb2``,
``task_service_pb2``, ``task_service_pb2_grpc``, ...): the whole API, for anything the
client does not cover. Never edited by hand, never committed: see setup.py."""
