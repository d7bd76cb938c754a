//! The JSON Schema of a tool's arguments, derived from the struct its calls are
//! deserialized into, so that what the model is offered and what a call may carry
//! cannot drift apart. The field docs are the descriptions the model reads.

use schemars::generate::SchemaSettings;
use schemars::transform::{RecursiveTransform, Transform};
use schemars::{JsonSchema, Schema};
use serde_json::Value;

/// The schema of the arguments `T`, plain enough for every provider: subschemas
/// inline (no `$ref` or `definitions`), no `$schema` or `title`. Each tool makes it
/// once (see its `PARAMETERS`).
pub(crate) fn parameters<T: JsonSchema>() -> Value {
    let mut schema = SchemaSettings::draft07()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator()
        .into_root_schema_for::<T>();
    RecursiveTransform(plain).transform(&mut schema);
    schema.to_value()
}

/// Takes out what schemars adds beyond the description of the arguments: the type
/// name as `title`, `default` values (the descriptions say them), integer `format`s
/// (annotations, `uint64`), and `null` in the types of optional properties (one the
/// model does not want is left out, never sent as `null`). A doc comment's line breaks
/// are the source's wrapping, not the text's.
fn plain(schema: &mut Schema) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    object.remove("title");
    object.remove("default");
    if object.get("type").and_then(Value::as_str) == Some("integer") {
        object.remove("format");
    }
    if let Some(Value::String(description)) = object.get_mut("description") {
        *description = description.replace('\n', " ");
    }
    let required: Vec<Value> = match object.get("required") {
        Some(Value::Array(required)) => required.clone(),
        _ => Vec::new(),
    };
    let Some(Value::Object(properties)) = object.get_mut("properties") else {
        return;
    };
    for (name, property) in properties {
        if required.iter().any(|r| r.as_str() == Some(name)) {
            continue;
        }
        if let Some(Value::Array(types)) = property.get_mut("type") {
            types.retain(|t| t != "null");
            if let [only] = types.as_mut_slice() {
                let only = only.take();
                property["type"] = only;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::parameters;
    use crate::tools::ToolRegistry;

    #[derive(JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[expect(dead_code, reason = "only its schema is made")]
    struct Sample {
        /// Wrapped in the source
        /// over two lines
        name: String,
        #[serde(default)]
        #[schemars(range(min = 1))]
        count: Option<u64>,
        #[serde(default)]
        flag: bool,
    }

    #[test]
    fn schemas_are_plain_and_optional_properties_not_nullable() {
        assert_eq!(
            parameters::<Sample>(),
            json!({
                "type": "object",
                "properties": {
                    "name": { "type": "string", "description": "Wrapped in the source over two lines" },
                    "count": { "type": "integer", "minimum": 1 },
                    "flag": { "type": "boolean" }
                },
                "required": ["name"],
                "additionalProperties": false
            })
        );
    }

    type Accepts = fn(Value) -> Result<(), serde_json::Error>;

    fn accepts<T: DeserializeOwned>(args: Value) -> Result<(), serde_json::Error> {
        serde_json::from_value::<T>(args).map(drop)
    }

    /// Each built-in tool, in registration order, with the arguments its calls are
    /// parsed into.
    const BUILTIN: [(&str, Accepts); 13] = [
        ("read", accepts::<crate::tools::read::Args>),
        ("list", accepts::<crate::tools::list::Args>),
        ("glob", accepts::<crate::tools::glob::Args>),
        ("grep", accepts::<crate::tools::grep::Args>),
        ("edit", accepts::<crate::tools::edit::Args>),
        ("write", accepts::<crate::tools::write::Args>),
        ("bash", accepts::<crate::tools::bash::Args>),
        ("webfetch", accepts::<crate::tools::webfetch::Args>),
        ("todowrite", accepts::<crate::tools::todowrite::Args>),
        ("todoread", accepts::<crate::tools::todoread::Args>),
        ("task", accepts::<crate::tools::task::Args>),
        ("task_status", accepts::<crate::tools::task_status::Args>),
        ("skill", accepts::<crate::tools::skill::Args>),
    ];

    fn names(values: &Value) -> Vec<&str> {
        let mut names: Vec<&str> = match values {
            Value::Object(object) => object.keys().map(String::as_str).collect(),
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        names.sort_unstable();
        names
    }

    /// Arguments the schema allows: its required properties, or all of them (and one
    /// item in each array) when `full`.
    fn example(schema: &Value, full: bool) -> Value {
        if let Some(first) = schema["enum"].as_array().and_then(|values| values.first()) {
            return first.clone();
        }
        match schema["type"].as_str() {
            Some("object") => {
                let required = names(&schema["required"]);
                let properties = schema["properties"].as_object().into_iter().flatten();
                Value::Object(
                    properties
                        .filter(|(name, _)| full || required.contains(&name.as_str()))
                        .map(|(name, property)| (name.clone(), example(property, full)))
                        .collect(),
                )
            }
            Some("array") if full => json!([example(&schema["items"], full)]),
            Some("array") => json!([]),
            Some("string") => json!("x"),
            Some("integer") => schema.get("minimum").cloned().unwrap_or(json!(0)),
            Some("boolean") => json!(true),
            other => panic!("no example for a schema of type {other:?}: {schema}"),
        }
    }

    #[test]
    fn every_builtin_schema_offers_what_its_arguments_accept() {
        let registry = ToolRegistry::builtin();
        let offered: Vec<_> = registry.iter().map(|tool| tool.name()).collect();
        assert_eq!(
            offered,
            BUILTIN.map(|(name, _)| name),
            "a tool is missing here"
        );
        for (tool, (name, accepts)) in registry.iter().zip(BUILTIN) {
            let schema = tool.parameters();
            assert_eq!(schema["type"], "object", "{name}");
            assert_eq!(schema["additionalProperties"], false, "{name}");

            let Value::Object(minimal) = example(&schema, false) else {
                panic!("{name} takes no object");
            };
            let minimal_ok = accepts(Value::Object(minimal.clone()));
            assert!(
                minimal_ok.is_ok(),
                "{name} refuses {minimal:?}: {minimal_ok:?}"
            );
            let full = example(&schema, true);
            let full_ok = accepts(full.clone());
            assert!(full_ok.is_ok(), "{name} refuses {full}: {full_ok:?}");
            for required in names(&schema["required"]) {
                let mut without = minimal.clone();
                without.remove(required);
                let refused = accepts(Value::Object(without)).is_err();
                assert!(refused, "{name} accepts no {required}");
            }

            // serde names every field it accepts when it refuses an unknown one:
            // "unknown field `zz`, expected one of `a`, `b`" (or "there are no fields").
            let mut unknown = minimal;
            unknown.insert("zz".into(), json!(1));
            let refused = accepts(Value::Object(unknown))
                .expect_err("unknown arguments are refused")
                .to_string();
            let mut accepted: Vec<&str> = refused.split('`').skip(3).step_by(2).collect();
            accepted.sort_unstable();
            assert_eq!(accepted, names(&schema["properties"]), "{name}: {refused}");
        }
    }

    /// The keywords of `schema` and its subschemas (not the names of properties).
    fn keywords<'a>(schema: &'a Value, found: &mut Vec<&'a str>) {
        match schema {
            Value::Object(object) => {
                for (key, value) in object {
                    found.push(key);
                    match (key.as_str(), value) {
                        ("properties", Value::Object(properties)) => {
                            properties.values().for_each(|p| keywords(p, found));
                        }
                        _ => keywords(value, found),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| keywords(item, found)),
            _ => {}
        }
    }

    #[test]
    fn no_builtin_schema_has_references_or_meta_keywords() {
        for tool in ToolRegistry::builtin().iter() {
            let schema = tool.parameters();
            let mut found = Vec::new();
            keywords(&schema, &mut found);
            for keyword in ["$ref", "$schema", "$defs", "definitions", "title"] {
                assert!(
                    !found.contains(&keyword),
                    "{}: {keyword} in {schema}",
                    tool.name()
                );
            }
        }
    }
}
