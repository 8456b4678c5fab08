//! The guard in SQL: `fb_screen` (instructions aimed at the model) and `fb_redact` (secrets), the pure-Rust
//! checks of `feedback_core::guard`. The write path applies both to every note in `_fb_clean_note`.

use feedback_core::guard::{self, Finding};
use pgrx::prelude::*;
use pgrx::JsonB;

use crate::host::check_size;

/// Findings as JSON objects, each tagged with the field it was found in (when given).
pub fn findings_json(findings: &[Finding], field: Option<&str>) -> Vec<serde_json::Value> {
    findings
        .iter()
        .map(|f| {
            let mut o = serde_json::Map::new();
            if let Some(field) = field {
                o.insert("field".into(), field.into());
            }
            o.insert("rule".into(), f.rule.into());
            o.insert("family".into(), f.family.into());
            o.insert("severity".into(), f.severity.as_str().into());
            o.insert("span".into(), f.span.clone().into());
            serde_json::Value::Object(o)
        })
        .collect()
}

/// What in a text looks like an instruction aimed at the model: a JSON array of findings (rule, family,
/// severity, span); `[]` for a clean text. Text is NFKC-normalised and stripped of invisible characters first.
#[pg_extern(stable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn fb_screen(text: &str) -> JsonB {
    check_size("text", text);
    JsonB(serde_json::Value::Array(findings_json(&guard::screen(text), None)))
}

/// One field a note stores apart from `_fb_clean_note` (the source), cleaned the same way in one call: secrets
/// redacted, the kinds replaced (sorted, each once), and the redacted text screened, each finding tagged with the
/// field's name.
#[pg_extern(stable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_clean_field(
    field: &str,
    value: &str,
) -> TableIterator<'static, (name!(text, String), name!(kinds, Vec<String>), name!(screening, JsonB))> {
    check_size(field, value);
    let r = guard::redact(value);
    let mut kinds: Vec<String> = r.kinds.iter().map(|k| k.to_string()).collect();
    kinds.sort();
    kinds.dedup();
    let findings = findings_json(&guard::screen(&r.text), Some(field));
    TableIterator::once((r.text, kinds, JsonB(serde_json::Value::Array(findings))))
}

/// The text with every secret replaced by a typed placeholder, e.g. `[REDACTED:aws_access_key]`.
#[pg_extern(stable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn fb_redact(text: &str) -> String {
    check_size("text", text);
    guard::redact(text).text
}
