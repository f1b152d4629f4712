//! Which dotted paths a scenario of the report can have, read from its JSON schema
//! (docs/report.schema.json, built in): a path that cannot exist is refused before the
//! run, and a key of a map that did not occur reads as 0.

use serde_json::Value;

const SCHEMA: &str = include_str!("../../../docs/report.schema.json");

fn root() -> Value {
    serde_json::from_str(SCHEMA).expect("the built-in schema is JSON")
}

/// Follow `$ref`s to the node they name.
fn resolve<'a>(root: &'a Value, mut node: &'a Value) -> &'a Value {
    while let Some(r) = node.get("$ref").and_then(Value::as_str) {
        let Some(p) = r.strip_prefix("#/") else { break };
        node = p.split('/').fold(root, |n, k| &n[k]);
    }
    node
}

/// Whether `key` may name an entry of the map `node` (its `propertyNames`: an enum,
/// or the three-digit pattern of status codes).
fn map_takes(node: &Value, key: &str) -> bool {
    match node.get("propertyNames") {
        Some(p) if p.get("enum").is_some() => p["enum"]
            .as_array()
            .is_some_and(|e| e.iter().any(|v| v == key)),
        Some(p) if p.get("pattern").is_some() => {
            key.len() == 3 && key.bytes().all(|b| b.is_ascii_digit()) && !key.starts_with('0')
        }
        _ => true,
    }
}

/// Follow `path` from a scenario (`comparison.` from a compare row): whether its last
/// step is a key of a map (absent: 0). `Err` names the first step that cannot be, a
/// usage error before the run.
pub(super) fn lookup(path: &str) -> Result<bool, String> {
    let root = root();
    let defs = &root["$defs"];
    let (mut node, rest) = match path.strip_prefix("comparison.") {
        Some(r) => (&defs["comparison"]["properties"]["rows"]["items"], r),
        None => (&defs["scenario"], path),
    };
    let mut in_map = false;
    let mut seen = Vec::new();
    for key in rest.split('.') {
        node = resolve(&root, node);
        // A figure that may be null (oneOf [X, null]): look into X.
        if let Some(one) = node.get("oneOf").and_then(Value::as_array) {
            if let Some(x) = one.iter().find(|b| b.get("type") != Some(&"null".into())) {
                node = resolve(&root, x);
            }
        }
        if let Some(next) = node.get("properties").and_then(|p| p.get(key)) {
            node = next;
            in_map = false;
        } else if let Some(values) = node.get("additionalProperties").filter(|a| a.is_object()) {
            if !map_takes(node, key) {
                return Err(format!("'{key}' cannot be a key of '{}'", seen.join(".")));
            }
            node = values;
            in_map = true;
        } else {
            let here = seen.join(".");
            let known: Vec<String> = node
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            return Err(if known.is_empty() {
                format!("'{here}' has no part '{key}': it is a single figure")
            } else {
                format!(
                    "'{key}' is not in the report{}: one of {}",
                    if here.is_empty() {
                        String::new()
                    } else {
                        format!(" under '{here}'")
                    },
                    known.join(", ")
                )
            });
        }
        seen.push(key);
    }
    Ok(in_map)
}
