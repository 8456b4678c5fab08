//! Reading what the model is asked to review: code, diffs and config files, with or without a developer's
//! question.
//!
//! - [`kind`]: whether an input is prose (a question, a description) or code.
//! - [`view`]: the text a diff leaves behind (its post-image: context and added lines, markers stripped), so a
//!   fix whose removed lines held the bug reads as the clean code it is.
//! - [`segments`]: windows of lines (hunks for a diff) embedded beside the whole input, so a note can match the
//!   few lines it is about in a long input.
//! - [`tokens`]: words and identifier parts (camelCase and snake_case split), lower-cased and lightly stemmed,
//!   for the lexical features.

/// What kind of input a query is. Prose and code are scored by different final decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Prose,
    Code,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Prose => "prose",
            Kind::Code => "code",
        }
    }
}

/// Lines of at least this many that look like code make an input code.
const CODE_LINES: usize = 2;

fn looks_like_code(line: &str) -> bool {
    let t = line.trim();
    if t.is_empty() {
        return false;
    }
    let first = t.as_bytes()[0];
    // Diff markers, comments, tags, keys, statements.
    if t.starts_with("@@") || t.starts_with("+++") || t.starts_with("---") || t.starts_with("diff --git") {
        return true;
    }
    if matches!(first, b'#' | b'/' | b'<' | b'{' | b'}' | b'[' | b']' | b')' | b'-' | b'+') && t.len() > 1 {
        return true;
    }
    let punct = t.chars().filter(|c| "{}();=<>[]:$&|\"'`".contains(*c)).count();
    let ends = t.ends_with(';') || t.ends_with('{') || t.ends_with('}') || t.ends_with(':') || t.ends_with(',');
    // Indented lines, `key: value` / `KEY=value` lines, lines dense in code punctuation.
    line.starts_with("  ") || line.starts_with('\t') || ends || punct * 12 >= t.len().max(1)
}

/// Prose unless at least two lines look like code (a one-line question is prose even with a `foo()` in it).
pub fn kind(input: &str) -> Kind {
    let code = input.lines().filter(|l| looks_like_code(l)).count();
    if code >= CODE_LINES && input.lines().filter(|l| !l.trim().is_empty()).count() >= 3 {
        Kind::Code
    } else {
        Kind::Prose
    }
}

fn is_diff(input: &str) -> bool {
    input.lines().any(|l| l.starts_with("@@ ")) || input.lines().any(|l| l.starts_with("+++ "))
}

/// The post-image of a diff (header and removed lines dropped, `+`/` ` markers stripped); any other input as it
/// is.
pub fn view(input: &str) -> String {
    if !is_diff(input) {
        return input.to_string();
    }
    let mut out = Vec::new();
    for line in input.lines() {
        if line.starts_with("diff --git")
            || line.starts_with("index ")
            || line.starts_with("+++")
            || line.starts_with("---")
        {
            continue;
        }
        if let Some(rest) = line.strip_prefix("@@") {
            // `@@ -a,b +c,d @@ fn context()`: keep the function context.
            if let Some(pos) = rest.find("@@") {
                let ctx = rest[pos + 2..].trim();
                if !ctx.is_empty() {
                    out.push(ctx.to_string());
                }
            }
            continue;
        }
        if line.starts_with('-') {
            continue;
        }
        out.push(line.strip_prefix('+').or_else(|| line.strip_prefix(' ')).unwrap_or(line).to_string());
    }
    out.join("\n")
}

/// Segmentation bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segmenting {
    /// Lines per window.
    pub window: usize,
    /// Lines between window starts.
    pub stride: usize,
    /// Most segments (evenly spread over the input when there would be more).
    pub max_segments: usize,
}

impl Default for Segmenting {
    fn default() -> Self {
        Segmenting { window: 6, stride: 4, max_segments: 8 }
    }
}

/// Windows of `window` non-blank lines of [`view`], `stride` apart, at most `max_segments`; none for an input that
/// fits one window (the whole input already is that segment).
pub fn segments(input: &str, s: &Segmenting) -> Vec<String> {
    let v = view(input);
    let lines: Vec<&str> = v.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    let (w, stride) = (s.window.max(1), s.stride.max(1));
    if lines.len() <= w || s.max_segments == 0 {
        return Vec::new();
    }
    let mut starts: Vec<usize> = (0..).map(|i| i * stride).take_while(|&st| st + w < lines.len() + stride).collect();
    if let Some(last) = starts.last_mut() {
        *last = (*last).min(lines.len() - w);
    }
    starts.dedup();
    if starts.len() > s.max_segments {
        let n = starts.len();
        starts = (0..s.max_segments).map(|i| starts[i * (n - 1) / (s.max_segments - 1).max(1)]).collect();
        starts.dedup();
    }
    starts.into_iter().map(|st| lines[st..(st + w).min(lines.len())].join("\n")).collect()
}

/// Words too common in prose or code to say what a lesson is about.
const STOP: &[&str] = &[
    "the",
    "and",
    "for",
    "are",
    "but",
    "not",
    "you",
    "all",
    "any",
    "can",
    "has",
    "have",
    "had",
    "was",
    "were",
    "this",
    "that",
    "with",
    "from",
    "into",
    "onto",
    "than",
    "then",
    "them",
    "they",
    "there",
    "their",
    "its",
    "our",
    "out",
    "use",
    "used",
    "uses",
    "using",
    "one",
    "two",
    "each",
    "every",
    "some",
    "only",
    "also",
    "when",
    "what",
    "which",
    "while",
    "where",
    "who",
    "why",
    "how",
    "does",
    "did",
    "doing",
    "done",
    "will",
    "would",
    "should",
    "could",
    "may",
    "might",
    "must",
    "just",
    "like",
    "get",
    "set",
    "put",
    "new",
    "let",
    "var",
    "const",
    "def",
    "function",
    "func",
    "return",
    "returns",
    "self",
    "else",
    "elif",
    "import",
    "export",
    "package",
    "public",
    "private",
    "protected",
    "static",
    "void",
    "class",
    "struct",
    "impl",
    "pub",
    "true",
    "false",
    "null",
    "none",
    "nil",
    "string",
    "int",
    "str",
    "err",
    "error",
    "value",
    "data",
    "name",
    "type",
    "file",
    "line",
    "code",
    "make",
    "see",
    "way",
    "here",
    "still",
    "even",
    "own",
    "same",
    "more",
    "most",
    "less",
    "much",
    "many",
    "too",
    "very",
    "yes",
    "ok",
    "okay",
    "this",
    "async",
    "await",
    "try",
    "catch",
    "fn",
    "mut",
    "echo",
    "end",
    "begin",
    "then",
    "fi",
    "do",
    "done",
];

fn stem(w: &str) -> String {
    for suf in ["ing", "ed", "es", "s"] {
        if let Some(base) = w.strip_suffix(suf) {
            if base.len() >= 4 {
                return base.to_string();
            }
        }
    }
    w.to_string()
}

/// Lower-cased, stemmed words and identifier parts of at least three letters, stop words dropped; an identifier
/// (`fetchUserById`, `max_pool_size`) gives its parts.
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in text.split(|c: char| !c.is_alphanumeric()) {
        if raw.is_empty() {
            continue;
        }
        // camelCase / PascalCase / digits boundaries.
        let chars: Vec<char> = raw.chars().collect();
        let mut part = String::new();
        for (i, &c) in chars.iter().enumerate() {
            let boundary = i > 0
                && ((c.is_uppercase() && chars[i - 1].is_lowercase())
                    || (c.is_uppercase()
                        && i + 1 < chars.len()
                        && chars[i + 1].is_lowercase()
                        && chars[i - 1].is_uppercase())
                    || (c.is_ascii_digit() != chars[i - 1].is_ascii_digit()));
            if boundary {
                push_token(&mut out, &part);
                part.clear();
            }
            part.push(c);
        }
        push_token(&mut out, &part);
    }
    out
}

fn push_token(out: &mut Vec<String>, part: &str) {
    let w = part.to_lowercase();
    if w.chars().count() < 3 || w.chars().all(|c| c.is_ascii_digit()) || STOP.contains(&w.as_str()) {
        return;
    }
    out.push(stem(&w));
}

/// Lexical evidence of each document (a note's lesson, correction and wrong answer) in an input: the share of
/// the document's distinct token weight the input contains, and that weight itself, with each token weighted by
/// its inverse document frequency among `docs` (the candidates: what sets one apart from the others counts).
pub fn lexical(input: &str, docs: &[&str]) -> Vec<(f32, f32)> {
    use std::collections::{HashMap, HashSet};
    let q: HashSet<String> = tokens(&view(input)).into_iter().collect();
    let sets: Vec<HashSet<String>> = docs.iter().map(|d| tokens(d).into_iter().collect()).collect();
    let mut df: HashMap<&str, usize> = HashMap::new();
    for s in &sets {
        for t in s {
            *df.entry(t.as_str()).or_default() += 1;
        }
    }
    let n = docs.len() as f32;
    let idf = |t: &str| ((n + 1.0) / (df.get(t).copied().unwrap_or(0) as f32 + 0.5)).ln().max(0.0);
    sets.iter()
        .map(|s| {
            let total: f32 = s.iter().map(|t| idf(t)).sum();
            let hit: f32 = s.iter().filter(|t| q.contains(*t)).map(|t| idf(t)).sum();
            (if total > 0.0 { hit / total } else { 0.0 }, hit)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_prose_and_snippets_are_code() {
        assert_eq!(
            kind("Route param looks like an integer and gets glued into the query string, is that safe?"),
            Kind::Prose
        );
        assert_eq!(kind("A static SimpleDateFormat is used by many request threads."), Kind::Prose);
        let py = "is this ok?\ndef get(id):\n    cur.execute(\"SELECT * FROM t WHERE id = \" + id)\n    return cur.fetchone()\n";
        assert_eq!(kind(py), Kind::Code);
        let yaml = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: aGVsbG8=\n";
        assert_eq!(kind(yaml), Kind::Code);
    }

    #[test]
    fn a_diff_reads_as_its_post_image() {
        let d = "--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@ def get(id):\n-    q = \"... \" + id\n+    q = \"... %s\"\n     run(q)\n";
        assert_eq!(view(d), "def get(id):\n    q = \"... %s\"\n    run(q)");
        assert_eq!(view("plain\ntext"), "plain\ntext");
    }

    #[test]
    fn long_inputs_are_cut_into_bounded_windows() {
        let s = Segmenting { window: 3, stride: 2, max_segments: 8 };
        assert!(segments("a\nb\nc", &s).is_empty());
        let text: String = (1..=7).map(|i| format!("l{i}\n")).collect();
        assert_eq!(segments(&text, &s), vec!["l1\nl2\nl3", "l3\nl4\nl5", "l5\nl6\nl7"]);
        let long: String = (1..=200).map(|i| format!("l{i}\n")).collect();
        let segs = segments(&long, &s);
        assert_eq!(segs.len(), 8);
        assert!(segs[0].starts_with("l1\n") && segs[7].ends_with("l200"));
    }

    #[test]
    fn identifiers_split_into_their_words() {
        assert_eq!(
            tokens("fetchUserById max_pool_size HTTPClient"),
            vec!["fetch", "user", "max", "pool", "size", "http", "client"]
        );
        assert_eq!(tokens("the timeouts were ignored"), vec!["timeout", "ignor"]);
    }

    #[test]
    fn lexical_weights_what_sets_a_note_apart() {
        let docs = ["Always pass a timeout to requests.get", "Close the cursor after fetchone"];
        let l = lexical("r = requests.get(url)\nprint(r.json())\n", &docs);
        assert!(l[0].0 > l[1].0 && l[0].1 > 0.0);
        assert_eq!(l[1], (0.0, 0.0));
    }
}
