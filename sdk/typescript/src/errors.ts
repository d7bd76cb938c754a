// The SDK's errors: one class per gRPC status code, built from a ConnectError in one
// place (`fromConnectError`), so that callers catch `NotFoundError` rather than
// comparing codes.
import { Code, ConnectError } from "@connectrpc/connect";

/** A gRPC status code's canonical name, as the server's errors carry it. */
export type ErrorCode =
  | "CANCELLED"
  | "UNKNOWN"
  | "INVALID_ARGUMENT"
  | "DEADLINE_EXCEEDED"
  | "NOT_FOUND"
  | "ALREADY_EXISTS"
  | "PERMISSION_DENIED"
  | "RESOURCE_EXHAUSTED"
  | "FAILED_PRECONDITION"
  | "ABORTED"
  | "OUT_OF_RANGE"
  | "UNIMPLEMENTED"
  | "INTERNAL"
  | "UNAVAILABLE"
  | "DATA_LOSS"
  | "UNAUTHENTICATED";

/** Any error of a taskwire call: `code` is the gRPC code's canonical name. */
export class TaskwireError extends Error {
  /** The gRPC status code's canonical name, e.g. `"NOT_FOUND"`. */
  readonly code: ErrorCode;
  /** The server's message, without the code (the `message` of the status). */
  readonly rawMessage: string;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.rawMessage = message;
    this.name = new.target.name;
  }
}

export class CancelledError extends TaskwireError {}
export class UnknownError extends TaskwireError {}
export class InvalidArgumentError extends TaskwireError {}
export class DeadlineExceededError extends TaskwireError {}
export class NotFoundError extends TaskwireError {}
export class AlreadyExistsError extends TaskwireError {}
export class PermissionDeniedError extends TaskwireError {}
export class ResourceExhaustedError extends TaskwireError {}
export class FailedPreconditionError extends TaskwireError {}
export class AbortedError extends TaskwireError {}
export class OutOfRangeError extends TaskwireError {}
export class UnimplementedError extends TaskwireError {}
export class InternalError extends TaskwireError {}
export class UnavailableError extends TaskwireError {}
export class DataLossError extends TaskwireError {}
export class UnauthenticatedError extends TaskwireError {}

/**
 * `Task.wait({ timeoutMs })` ran out of time before the task's result came (a client
 * side timeout: the task goes on running). A `DeadlineExceededError`, code
 * `DEADLINE_EXCEEDED`.
 */
export class TimeoutError extends DeadlineExceededError {}

type ErrorClass = new (code: ErrorCode, message: string, options?: { cause?: unknown }) => TaskwireError;

const byCode: Record<ErrorCode, ErrorClass> = {
  CANCELLED: CancelledError,
  UNKNOWN: UnknownError,
  INVALID_ARGUMENT: InvalidArgumentError,
  DEADLINE_EXCEEDED: DeadlineExceededError,
  NOT_FOUND: NotFoundError,
  ALREADY_EXISTS: AlreadyExistsError,
  PERMISSION_DENIED: PermissionDeniedError,
  RESOURCE_EXHAUSTED: ResourceExhaustedError,
  FAILED_PRECONDITION: FailedPreconditionError,
  ABORTED: AbortedError,
  OUT_OF_RANGE: OutOfRangeError,
  UNIMPLEMENTED: UnimplementedError,
  INTERNAL: InternalError,
  UNAVAILABLE: UnavailableError,
  DATA_LOSS: DataLossError,
  UNAUTHENTICATED: UnauthenticatedError,
};

const codeNames: Record<Code, ErrorCode> = {
  [Code.Canceled]: "CANCELLED",
  [Code.Unknown]: "UNKNOWN",
  [Code.InvalidArgument]: "INVALID_ARGUMENT",
  [Code.DeadlineExceeded]: "DEADLINE_EXCEEDED",
  [Code.NotFound]: "NOT_FOUND",
  [Code.AlreadyExists]: "ALREADY_EXISTS",
  [Code.PermissionDenied]: "PERMISSION_DENIED",
  [Code.ResourceExhausted]: "RESOURCE_EXHAUSTED",
  [Code.FailedPrecondition]: "FAILED_PRECONDITION",
  [Code.Aborted]: "ABORTED",
  [Code.OutOfRange]: "OUT_OF_RANGE",
  [Code.Unimplemented]: "UNIMPLEMENTED",
  [Code.Internal]: "INTERNAL",
  [Code.Unavailable]: "UNAVAILABLE",
  [Code.DataLoss]: "DATA_LOSS",
  [Code.Unauthenticated]: "UNAUTHENTICATED",
};

/** A TaskwireError of the class of `code`. */
export function errorOf(code: ErrorCode, message: string, cause?: unknown): TaskwireError {
  const Class = byCode[code] ?? UnknownError;
  return new Class(code, message, cause === undefined ? undefined : { cause });
}

/**
 * The one place a call's error becomes a TaskwireError: a ConnectError by its code,
 * a TaskwireError as it is, anything else as UNKNOWN (its `cause` kept).
 */
export function toTaskwireError(err: unknown): TaskwireError {
  if (err instanceof TaskwireError) return err;
  const ce = ConnectError.from(err);
  const code = codeNames[ce.code] ?? "UNKNOWN";
  return errorOf(code, ce.rawMessage, err);
}
