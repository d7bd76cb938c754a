"""Building the API's request messages from Python values (shared by both clients)."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple, Union, cast
from urllib.parse import urlsplit

from google.protobuf import json_format, struct_pb2, timestamp_pb2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from .models import status_value
from .v1 import task_service_pb2 as api

Deadline = Union[datetime, timedelta, timestamp_pb2.Timestamp]

# Values that take a JSON text on the wire but a dict here too.
_JSON_TEXT_FIELDS = {"output_schema"}

def approval_answer(answer: Union[str, int]) -> int:
    """``"once"``, ``"always"`` or ``"reject"`` as the wire's ApprovalAnswer."""
    if isinstance(answer, int):
        return answer
    name = "APPROVAL_ANSWER_" + str(answer).strip().upper()
    try:
        value = int(api.ApprovalAnswer.Value(name))
    except ValueError:
        value = 0
    if value == 0:
        raise ValueError(
            f"unknown approval answer {answer!r}; one of 'once', 'always', 'reject'"
        )
    return value


def timestamp(value: Deadline, field: str = "deadline") -> timestamp_pb2.Timestamp:
    """An aware datetime, a timedelta from now, or a Timestamp (for the option `field`)."""
    if isinstance(value, timestamp_pb2.Timestamp):
        return value
    if isinstance(value, timedelta):
        value = datetime.now(timezone.utc) + value
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                f"{field}: a naive datetime is ambiguous; give an aware one "
                "(datetime.now(timezone.utc) + ...) or a timedelta from now"
            )
        ts = timestamp_pb2.Timestamp()
        ts.FromDatetime(value.astimezone(timezone.utc))
        return ts
    raise TypeError(
        f"{field}: expected a datetime, timedelta or Timestamp, got {type(value).__name__}"
    )


def _is_repeated(f: Any) -> bool:
    is_repeated = getattr(f, "is_repeated", None)
    if is_repeated is not None:
        return bool(is_repeated)
    return bool(f.label == FieldDescriptor.LABEL_REPEATED)  # older protobuf


def _message_value(f: Any, value: Any, target: Message) -> None:
    """Sets the singular message field `f` of `target` from `value`."""
    name = f.name
    full = f.message_type.full_name
    if full == "google.protobuf.Timestamp":
        getattr(target, name).CopyFrom(timestamp(value, name))
    elif full == "google.protobuf.Struct":
        if isinstance(value, struct_pb2.Struct):
            getattr(target, name).CopyFrom(value)
        elif isinstance(value, Mapping):
            getattr(target, name).update(dict(value))
        else:
            raise TypeError(f"{name}: expected a dict, got {type(value).__name__}")
    elif isinstance(value, Message):
        getattr(target, name).CopyFrom(value)
    elif isinstance(value, Mapping):
        json_format.ParseDict(dict(value), getattr(target, name))
    else:
        raise TypeError(
            f"{name}: expected a {f.message_type.name} or a dict, got {type(value).__name__}"
        )


def _repeated_value(f: Any, value: Any, target: Message) -> None:
    name = f.name
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{name}: expected a list, got {type(value).__name__}")
    container = getattr(target, name)
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        for item in value:
            if isinstance(item, Message):
                container.add().CopyFrom(item)
            elif isinstance(item, Mapping):
                json_format.ParseDict(dict(item), container.add())
            else:
                raise TypeError(
                    f"{name}: expected {f.message_type.name} messages or dicts, "
                    f"got {type(item).__name__}"
                )
    else:
        container.extend(list(value))


def set_fields(
    request: Message,
    options: Mapping[str, Any],
    method: str,
    reserved: Tuple[str, ...] = (),
) -> Message:
    """Sets `request`'s fields from keyword options named as the fields; None leaves
    a field unset. An option that names no field raises TypeError naming it."""
    fields = request.DESCRIPTOR.fields_by_name
    for name, value in options.items():
        f: Any = fields.get(name)
        if f is None or name in reserved:
            raise TypeError(f"{method}() got an unexpected keyword argument {name!r}")
        if value is None:
            continue
        try:
            if name in _JSON_TEXT_FIELDS and not isinstance(value, str):
                value = json.dumps(value)
            if _is_repeated(f):
                _repeated_value(f, value, request)
            elif f.type == FieldDescriptor.TYPE_MESSAGE:
                _message_value(f, value, request)
            elif f.type == FieldDescriptor.TYPE_ENUM and isinstance(value, str):
                enum_value = f.enum_type.values_by_name.get(value)
                if enum_value is None:
                    raise ValueError(f"{name}: no such value {value!r}")
                setattr(request, name, enum_value.number)
            else:
                setattr(request, name, value)
        except (TypeError, ValueError) as e:
            text = str(e)
            if not text.startswith(name + ":"):
                text = f"{name}: {text}"
            raise type(e)(text) from e
    return request


def submit_request(agent: str, prompt: str, options: Dict[str, Any]) -> api.SubmitRequest:
    request = api.SubmitRequest(agent=agent, prompt=prompt)
    return set_fields(request, options, "submit", reserved=("agent", "prompt"))  # type: ignore[return-value]


def run_command_request(
    name: str, args: str, options: Dict[str, Any]
) -> api.RunCommandRequest:
    request = api.RunCommandRequest(command=name, arguments=args)
    return set_fields(  # type: ignore[return-value]
        request, options, "run_command", reserved=("command", "arguments")
    )


def list_request(
    trace_id: Optional[str],
    parent_task_id: Optional[str],
    status: Optional[Union[str, int]],
    agent: Optional[str],
    limit: Optional[int],
    tenant: Optional[str],
) -> api.ListRequest:
    return api.ListRequest(
        trace_id=trace_id or "",
        parent_task_id=parent_task_id or "",
        status=cast(Any, status_value(status) if status is not None else 0),
        agent=agent or "",
        limit=limit or 0,
        tenant=tenant or "",
    )


def approve_request(
    task_id: str, request_id: str, answer: Union[str, int], message: Optional[str]
) -> api.ApproveRequest:
    return api.ApproveRequest(
        task_id=task_id,
        request_id=request_id,
        answer=cast(Any, approval_answer(answer)),
        message=message or "",
    )


# --- channels ------------------------------------------------------------------------

#: Results carry whole patches (up to 64 MiB): far past gRPC's 4 MiB default.
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]


def parse_addr(addr: str) -> Tuple[str, bool]:
    """``http://host:port`` (plaintext) or ``https://host:port`` (TLS) as the
    channel's target and whether it uses TLS. A bare ``host:port`` is plaintext."""
    if "://" not in addr:
        return addr, False
    parts = urlsplit(addr)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"addr {addr!r}: the scheme must be http:// or https://")
    if not parts.hostname:
        raise ValueError(f"addr {addr!r}: no host")
    if parts.path not in ("", "/") or parts.query:
        raise ValueError(f"addr {addr!r}: expected scheme://host:port, without a path")
    tls = scheme == "https"
    port = parts.port or (443 if tls else 80)
    host = parts.hostname
    if ":" in host:  # IPv6
        host = f"[{host}]"
    return f"{host}:{port}", tls


def read_ca(tls_ca: Union[str, bytes, "os.PathLike[str]", None]) -> Optional[bytes]:
    """A CA bundle given as PEM bytes (or text), or the path of a PEM file."""
    if tls_ca is None:
        return None
    if isinstance(tls_ca, bytes):
        return tls_ca
    if isinstance(tls_ca, str) and tls_ca.lstrip().startswith("-----BEGIN"):
        return tls_ca.encode()
    with open(tls_ca, "rb") as f:
        return f.read()


def auth_metadata(token: Optional[str]) -> Tuple[Tuple[str, str], ...]:
    if not token:
        return ()
    return (("authorization", f"Bearer {token}"),)
