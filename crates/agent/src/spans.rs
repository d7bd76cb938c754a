//! The session's trace spans, named in one place (see `docs/observability.md`):
//! `execute_tool <tool>` per tool call (OpenTelemetry GenAI conventions),
//! `await_approval` while a call waits for an answer, and `execute_hook` per hook run.
//! Each is a child of the span current where it starts (the attempt's `invoke_agent`,
//! or for a tool event's hook the call's `execute_tool`). Tool arguments and results
//! are never recorded.

use taskwire_traces::{Attribute, Parent, Span, SpanBuilder, Spanned};

use crate::error::ToolError;
use crate::hooks::{Hook, HookAction};

/// The spans of one tool call, from its approval (if asked) to its result.
pub(crate) fn execute_tool(tool: &str, call_id: &str) -> Spanned {
    Spanned {
        log: tracing::info_span!(
            "execute_tool",
            gen_ai.tool.name = tool,
            gen_ai.tool.call.id = call_id
        ),
        trace: Span::start(Parent::Current, || {
            SpanBuilder::from_name(format!("execute_tool {tool}")).with_attributes([
                Attribute::new("gen_ai.operation.name", "execute_tool"),
                Attribute::new("gen_ai.tool.name", tool.to_owned()),
                Attribute::new("gen_ai.tool.call.id", call_id.to_owned()),
            ])
        }),
    }
}

/// Marks the tool call's span failed, with the kind of error as its type.
pub(crate) fn tool_failed(span: &Span, err: &ToolError) {
    if !span.is_recording() {
        return;
    }
    let debug = format!("{err:?}");
    let kind = debug
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or_default();
    span.fail(kind.to_owned());
}

/// The span of a wait for an approval answer.
pub(crate) fn await_approval(permission: &str, request_id: &str) -> Span {
    Span::start(Parent::Current, || {
        SpanBuilder::from_name("await_approval").with_attributes([
            Attribute::new("approval.permission", permission.to_owned()),
            Attribute::new("approval.request_id", request_id.to_owned()),
        ])
    })
}

/// The spans of one hook run.
pub(crate) fn execute_hook(hook: &Hook, call_id: &str) -> Spanned {
    let kind = match hook.action {
        HookAction::Command { .. } => "command",
        HookAction::Http { .. } => "http",
    };
    Spanned {
        log: tracing::info_span!(
            "execute_hook",
            hook.event = hook.event.as_str(),
            hook.kind = kind,
            hook.source = %hook.source,
        ),
        trace: Span::start(Parent::Current, || {
            SpanBuilder::from_name("execute_hook").with_attributes([
                Attribute::new("hook.event", hook.event.as_str()),
                Attribute::new("hook.kind", kind),
                Attribute::new("hook.source", hook.source.to_string()),
                Attribute::new("gen_ai.tool.call.id", call_id.to_owned()),
            ])
        }),
    }
}
