//! `fb_build_prompt`'s assembly: fenced, numbered, neutralised lessons under a budget counted with the
//! embedding model's tokenizer.

use feedback_core::prompt::{build_prompt, PromptNote};
use pgrx::check_for_interrupts;
use pgrx::prelude::*;

use crate::error::FbError;
use crate::host;

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_build_prompt(
    instructions: Option<&str>,
    lessons: Array<&str>,
    corrections: Array<&str>,
    max_context_tokens: Option<i32>,
) -> String {
    let max_context_tokens = match max_context_tokens {
        Some(n) if n >= 1 => n,
        n => FbError::invalid_argument(
            format!(
                "max_context_tokens must be positive, not {}",
                n.map_or_else(|| "NULL".to_string(), |n| n.to_string())
            ),
            "It is the token budget of the prior-corrections block, e.g. 800.",
        )
        .report(),
    };
    // Both caps before any tokenizer runs: each lesson and correction, and their total. The instructions are not
    // tokenized (they are not part of the counted block), but they are copied into the prompt: capped per text.
    host::check_size("base_instructions", instructions.unwrap_or(""));
    let mut total = 0usize;
    let texts = lessons.iter().map(|t| ("lesson", t)).chain(corrections.iter().map(|t| ("correction", t)));
    for (what, text) in texts {
        let text = text.unwrap_or("");
        host::check_size(what, text);
        total = total.saturating_add(text.len());
    }
    host::check_call("the lessons and corrections of this call", total);
    let notes: Vec<PromptNote> = lessons
        .iter()
        .zip(corrections.iter())
        .map(|(l, c)| PromptNote { lesson: l.unwrap_or(""), correction: c.unwrap_or("") })
        .collect();
    // One count per note tried: check for cancellation between them.
    let mut count = |text: &str| {
        check_for_interrupts!();
        Ok::<usize, ()>(host::count_tokens(text))
    };
    build_prompt(instructions.unwrap_or(""), &notes, max_context_tokens as usize, &mut count)
        .map(|(prompt, _)| prompt)
        .unwrap_or_default()
}
