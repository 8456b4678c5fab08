//! Parameterized tests: the data rows of `[InlineData("svc", "…")]`, `[TestCase]`, `[DataRow]`, `[TestFixture]`,
//! JUnit's `@CsvSource` and pytest's `parametrize` bind to the test's parameters by position, so a value is a
//! secret when the parameter it lands in is named for one (`string password`, `apiKey: String`, `pwd`). The rows
//! name nothing themselves: no other rule can tell a password from a user name there.

use std::sync::LazyLock;

use regex::Regex;

/// One value of a data row: its position among the row's values, where it sits in the text, and its text.
struct Value {
    position: usize,
    start: usize,
    end: usize,
}

/// At most this many parameterized blocks are read per text (each is a few regex passes over a few lines).
const MAX_BLOCKS: usize = 32;

/// The spans of the values that land in secret-named parameters, with the kind each is redacted as; sorted, not
/// overlapping.
pub(super) fn secret_spans(
    text: &str,
    judge: impl Fn(&str, &str) -> Option<&'static str>,
) -> Vec<(usize, usize, &'static str)> {
    static ATTRIBUTE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?m)^[ \t]*(?:\[<?|<)[ \t]*(?:InlineData|TestCase|DataRow|TestFixture|Arguments)[ \t]*\((.*)\)[ \t]*>?[\]>]")
            .expect("test case attribute")
    });
    static CSV: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"@CsvSource[ \t]*\(").expect("csv source"));
    static DELIMITER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"delimiter\s*=\s*'(.)'").expect("delimiter"));
    static PARAMETRIZE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"@pytest\.mark\.parametrize\(\s*["']([\w\s,]+)["']\s*,\s*\["#).expect("parametrize")
    });
    if !text.contains("Data")
        && !text.contains("TestCase")
        && !text.contains("TestFixture")
        && !text.contains("Arguments")
        && !text.contains("@CsvSource")
        && !text.contains("parametrize")
    {
        return Vec::new();
    }
    let mut spans = Vec::new();
    let mut blocks = 0;
    // C#, VB, F#: one row per attribute; the parameters are the next declaration's.
    let mut rows: Vec<Vec<Value>> = Vec::new();
    for c in ATTRIBUTE.captures_iter(text) {
        let (Some(all), Some(args)) = (c.get(0), c.get(1)) else { continue };
        rows.push(arguments(text, args.start(), args.end()));
        // The next line that is not another attribute ends the group of rows.
        let rest = &text[all.end()..];
        let next = rest.trim_start_matches(['\r', '\n', ' ', '\t']);
        if next.starts_with('[') || next.starts_with('<') {
            continue;
        }
        blocks += 1;
        if blocks > MAX_BLOCKS {
            break;
        }
        let names = parameters_after(text, all.end());
        mark(&rows, &names, &mut spans, text, &judge);
        rows.clear();
    }
    // JUnit: each string of @CsvSource is a row (or each line of its text block).
    for m in CSV.find_iter(text).take(MAX_BLOCKS) {
        let Some(close) = closing_paren(text, m.end() - 1) else { continue };
        let body = &text[m.end()..close];
        let delimiter =
            DELIMITER.captures(body).and_then(|c| c.get(1)).and_then(|d| d.as_str().chars().next()).unwrap_or(',');
        let mut rows = Vec::new();
        for (start, end) in string_literals(body) {
            let (start, end) = (m.end() + start, m.end() + end);
            let literal = &text[start..end];
            if literal.starts_with("\"\"\"") {
                let inner = start + 3;
                let mut at = inner;
                for line in text[inner..end - 3].split_inclusive('\n') {
                    rows.push(csv_values(text, at, at + line.trim_end_matches(['\r', '\n']).len(), delimiter));
                    at += line.len();
                }
            } else if literal.len() >= 2 {
                rows.push(csv_values(text, start + 1, end - 1, delimiter));
            }
        }
        let names = parameters_after(text, close + 1);
        mark(&rows, &names, &mut spans, text, &judge);
    }
    // pytest: the names are the first argument; each tuple of the list is a row.
    for c in PARAMETRIZE.captures_iter(text).take(MAX_BLOCKS) {
        let (Some(all), Some(list)) = (c.get(0), c.get(1)) else { continue };
        let Some(close) = closing_bracket(text, all.end() - 1) else { continue };
        if parameters_after(text, close).is_empty() {
            continue; // no test after it, or a test of password rules
        }
        let names: Vec<String> = list.as_str().split(',').map(|n| n.trim().to_string()).collect();
        let mut rows = Vec::new();
        let mut at = all.end();
        while at < close {
            let Some(open) = text[at..close].find('(').map(|i| at + i) else { break };
            // A `(` in a comment may leave its row unclosed before the list ends: stop there.
            let Some(end) = closing_paren(text, open).filter(|&e| e < close) else { break };
            rows.push(arguments(text, open + 1, end));
            at = end + 1;
        }
        mark(&rows, &names, &mut spans, text, &judge);
    }
    spans.sort();
    spans.dedup_by(|b, a| b.0 < a.1);
    spans
}

/// Redacts every value whose parameter is named for a secret.
fn mark(
    rows: &[Vec<Value>],
    names: &[String],
    spans: &mut Vec<(usize, usize, &'static str)>,
    text: &str,
    judge: &impl Fn(&str, &str) -> Option<&'static str>,
) {
    for row in rows {
        for v in row {
            let Some(name) = names.get(v.position) else { continue };
            if let Some(kind) = judge(name, &text[v.start..v.end]) {
                spans.push((v.start, v.end, kind));
            }
        }
    }
}

/// The string values of an argument list (`"a", 1, "b"`) between `start` and `end`, by position (a non-string
/// argument takes a position and is not a value).
fn arguments(text: &str, start: usize, end: usize) -> Vec<Value> {
    let mut values = Vec::new();
    let mut position = 0;
    let mut depth = 0i32;
    let bytes = text.as_bytes();
    let mut i = start;
    while i < end {
        match bytes[i] {
            b'"' | b'\'' => {
                let quote = bytes[i];
                let mut j = i + 1;
                while j < end && bytes[j] != quote {
                    j += if bytes[j] == b'\\' { 2 } else { 1 };
                }
                if depth == 0 && j <= end {
                    values.push(Value { position, start: i + 1, end: j.min(end) });
                }
                i = j + 1;
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth < 0 {
                    break; // `[InlineData("a"), Trait("x", "y")]`: the row ends with its own `)`
                }
            }
            b',' if depth == 0 => position += 1,
            _ => {}
        }
        i += 1;
    }
    values
}

/// The values of one CSV row between `start` and `end`, trimmed, unquoted (`'a, b'` is one value).
fn csv_values(text: &str, start: usize, end: usize, delimiter: char) -> Vec<Value> {
    let mut values = Vec::new();
    let mut position = 0;
    let mut cell = start;
    let mut quoted = false;
    for (i, ch) in text[start..end].char_indices().map(|(i, c)| (start + i, c)).chain(std::iter::once((end, delimiter)))
    {
        if ch == '\'' && i < end {
            quoted = !quoted;
        } else if ch == delimiter && !quoted {
            let raw = &text[cell..i];
            let lead = raw.len() - raw.trim_start().len();
            let (mut s, mut e) = (cell + lead, cell + raw.trim_end().len());
            if e > s + 1 && text[s..e].starts_with('\'') && text[s..e].ends_with('\'') {
                s += 1;
                e -= 1;
            }
            if e > s {
                values.push(Value { position, start: s, end: e });
            }
            position += 1;
            cell = i + ch.len_utf8();
        }
    }
    values
}

/// The parameter names of the first declaration after `from` (within a few lines): `Name(string user, string
/// password)`, `fun name(user: String, pwd: String)`, `Sub Name(user As String, password As String)`,
/// `let name (user: string, pwd: string) =`.
///
/// None for a test of password rules rather than of a login (its name says valid, weak, policy, length, hash…):
/// its values are inputs to the rules, not credentials.
fn parameters_after(text: &str, from: usize) -> Vec<String> {
    static DECLARATION: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?m)^[ \t]*[^\[@<\s#/][^\n(]*\(([^()\n]*)\)").expect("declaration"));
    static RULES_TEST: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)valid|reject|weak|strong|polic|complex|strength|short|long|length|hash|format|mask|require|compromis|breach|common|forbid|disallow|deny|wrong|bad|fail")
            .expect("rules test")
    });
    let window_end = text[from..].match_indices('\n').nth(12).map_or(text.len(), |(i, _)| from + i);
    let Some(c) = DECLARATION.captures(&text[from..window_end]) else { return Vec::new() };
    let (Some(all), Some(list)) = (c.get(0), c.get(1)) else { return Vec::new() };
    if RULES_TEST.is_match(&all.as_str()[..list.start() - all.start()]) {
        return Vec::new();
    }
    list.as_str()
        .split(',')
        .map(|p| {
            let p = p.trim();
            let name = if let Some((name, _)) = p.split_once(':') {
                name
            } else if let Some((name, _)) = p.split_once(" As ") {
                name
            } else {
                p.rsplit([' ', '\t']).next().unwrap_or(p)
            };
            name.trim().trim_start_matches(['$', '@']).to_string()
        })
        .collect()
}

/// The string literals of `body` (Java's `"…"` and text blocks `"""…"""`), as byte ranges quotes included.
fn string_literals(body: &str) -> Vec<(usize, usize)> {
    let b = body.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"\"\"\"") {
            let Some(end) = body[i + 3..].find("\"\"\"") else { break };
            out.push((i, i + 3 + end + 3));
            i += 3 + end + 3;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' && b[j] != b'\n' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            if j >= b.len() || b[j] != b'"' {
                break;
            }
            out.push((i, j + 1));
            i = j + 1;
        } else {
            i += 1;
        }
    }
    out
}

fn closing_paren(text: &str, open: usize) -> Option<usize> {
    closing(text, open, b'(', b')')
}

fn closing_bracket(text: &str, open: usize) -> Option<usize> {
    closing(text, open, b'[', b']')
}

/// The index of the bracket that closes the one at `open` (quotes skipped), within 8 kB.
fn closing(text: &str, open: usize, left: u8, right: u8) -> Option<usize> {
    let b = text.as_bytes();
    let mut depth = 0;
    let mut i = open;
    let limit = (open + 8192).min(b.len());
    while i < limit {
        match b[i] {
            b'"' | b'\'' => {
                let q = b[i];
                i += 1;
                while i < limit && b[i] != q {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            c if c == left => depth += 1,
            c if c == right => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}
