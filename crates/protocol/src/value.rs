//! Conversions between `google.protobuf.Struct`/`Value` and `serde_json::Value`.

use prost_types::value::Kind;
use serde_json::Value;

/// A JSON object as a protobuf `Struct`; any other JSON value is wrapped as `{"value": v}`.
pub fn json_to_struct(v: &Value) -> prost_types::Struct {
    match v {
        Value::Object(map) => prost_types::Struct {
            fields: map
                .iter()
                .map(|(k, v)| (k.clone(), json_to_value(v)))
                .collect(),
        },
        other => prost_types::Struct {
            fields: [("value".to_owned(), json_to_value(other))]
                .into_iter()
                .collect(),
        },
    }
}

pub fn struct_to_json(s: &prost_types::Struct) -> Value {
    Value::Object(
        s.fields
            .iter()
            .map(|(k, v)| (k.clone(), value_to_json(v)))
            .collect(),
    )
}

fn json_to_value(v: &Value) -> prost_types::Value {
    let kind = match v {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(a) => Kind::ListValue(prost_types::ListValue {
            values: a.iter().map(json_to_value).collect(),
        }),
        Value::Object(_) => Kind::StructValue(json_to_struct(v)),
    };
    prost_types::Value { kind: Some(kind) }
}

fn value_to_json(v: &prost_types::Value) -> Value {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::NumberValue(n)) => {
            serde_json::Number::from_f64(*n).map_or(Value::Null, Value::Number)
        }
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::ListValue(l)) => Value::Array(l.values.iter().map(value_to_json).collect()),
        Some(Kind::StructValue(s)) => struct_to_json(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_json_round_trips() {
        let v = serde_json::json!({"a": 1.5, "b": [true, null, "x"], "c": {"d": "e"}});
        assert_eq!(struct_to_json(&json_to_struct(&v)), v);
    }
}
