use serde_json::json;

use super::*;

fn schema() -> OutputSchema {
    OutputSchema::parse(
        r#"{"type": "object", "properties": {"files": {"type": "array", "items": {"type": "string"}}, "count": {"type": "integer"}}, "required": ["files", "count"], "additionalProperties": false}"#,
    )
    .expect("a valid schema")
}

#[test]
fn a_valid_answer_is_returned_as_json() {
    let value = schema()
        .check(r#"{"files": ["a.ts"], "count": 1}"#)
        .expect("valid");
    assert_eq!(value, json!({"files": ["a.ts"], "count": 1}));
}

#[test]
fn a_fenced_json_block_is_accepted() {
    let answer = "Here it is:\n```json\n{\"files\": [], \"count\": 0}\n```\n";
    assert_eq!(
        schema().check(answer).expect("fenced"),
        json!({"files": [], "count": 0})
    );
    let bare_fence = "```\n{\"files\": [], \"count\": 2}\n```";
    assert_eq!(schema().check(bare_fence).expect("fenced")["count"], 2);
}

#[test]
fn each_violation_is_named_with_its_location() {
    let errors = schema()
        .check(r#"{"files": "a.ts", "extra": true}"#)
        .expect_err("invalid");
    assert!(errors.contains("at /files:"), "{errors}");
    assert!(errors.contains("count"), "the missing property: {errors}");
    assert!(
        errors.contains("extra"),
        "the unexpected property: {errors}"
    );
}

#[test]
fn prose_an_empty_answer_and_a_non_object_are_refused() {
    let s = schema();
    assert!(
        s.check("I found two files.")
            .expect_err("prose")
            .contains("not valid json")
    );
    assert!(s.check("  ").expect_err("empty").contains("empty"));
    assert!(
        s.check("[1, 2]")
            .expect_err("array")
            .contains("JSON object")
    );
}

#[test]
fn a_bad_schema_is_refused_with_the_reason() {
    assert!(
        OutputSchema::parse("{nope")
            .expect_err("json")
            .contains("not valid json")
    );
    assert!(
        OutputSchema::parse("[]")
            .expect_err("array")
            .contains("JSON Schema object")
    );
    assert!(
        OutputSchema::parse(r#"{"type": "string"}"#)
            .expect_err("not an object")
            .contains("must describe a JSON object")
    );
    assert!(
        OutputSchema::parse(r#"{"type": "object", "properties": {"a": {"type": "strnig"}}}"#)
            .expect_err("meta-schema")
            .contains("not a valid JSON Schema")
    );
    let huge = format!(r#"{{"description": "{}"}}"#, "x".repeat(MAX_SCHEMA_BYTES));
    assert!(
        OutputSchema::parse(&huge)
            .expect_err("large")
            .contains("limit")
    );
    assert!(OutputSchema::parse(r#"{"type": ["object", "null"]}"#).is_ok());
}

#[test]
fn the_instructions_show_the_schema() {
    let text = schema().instructions();
    assert!(text.contains("\"required\""), "{text}");
    assert!(text.contains("one JSON object"), "{text}");
}
