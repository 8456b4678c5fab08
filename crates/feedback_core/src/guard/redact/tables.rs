//! Tables: a Markdown, CSV or TSV table whose header names a column for a secret (`| User | Password |`,
//! `username,email,temp_password`, `ssid<TAB>passphrase`). Its cells name nothing themselves, so no other rule can
//! tell a password in a row from a user name; the header's column does.

/// At most this many tables are read per text.
const MAX_TABLES: usize = 16;
/// At most this many columns per row.
const MAX_COLUMNS: usize = 64;

/// The spans of the cells in secret-named columns, with the kind each is redacted as; sorted, not overlapping.
/// `secret_name(column)` says whether a column is named for a secret (the table is read only then);
/// `judge(column, cell)` whether a cell is a secret for its column's name, and of which kind.
pub(super) fn secret_spans(
    text: &str,
    secret_name: impl Fn(&str) -> bool,
    judge: impl Fn(&str, &str) -> Option<&'static str>,
) -> Vec<(usize, usize, &'static str)> {
    let lines = line_ranges(text);
    let mut out = Vec::new();
    let mut tables = 0;
    let mut i = 0;
    while i < lines.len() && tables < MAX_TABLES {
        let (start, end) = lines[i];
        let Some(delimiter) = delimiter_of(&text[start..end]) else {
            i += 1;
            continue;
        };
        let header = cells(text, start, end, delimiter);
        let raw: Vec<&str> = header.iter().map(|&(s, e)| &text[s..e]).collect();
        let names: Vec<String> = raw.iter().map(|c| clean_name(c)).collect();
        // A header: a Markdown row with its rule line under it, or CSV/TSV column names (plain names, none empty),
        // not a row of a table that started above.
        let follows_row = i > 0 && delimiter_of(&text[lines[i - 1].0..lines[i - 1].1]) == Some(delimiter);
        let header_like = if delimiter == '|' {
            lines.get(i + 1).is_some_and(|&(s, e)| is_markdown_rule(&text[s..e]))
        } else {
            !follows_row && raw.iter().all(|c| column_name(c))
        };
        if !header_like || names.len() < 2 || names.len() > MAX_COLUMNS || !names.iter().any(|n| secret_name(n)) {
            i += 1;
            continue;
        }
        tables += 1;
        let mut j = i + 1;
        while j < lines.len() {
            let (s, e) = lines[j];
            let line = &text[s..e];
            if delimiter == '|' && is_markdown_rule(line) {
                j += 1;
                continue;
            }
            // A data row only has to hold the delimiter: the prose test is for headers, and a row must read the
            // same before and after a redaction inside it.
            if !line.contains(delimiter) {
                break;
            }
            let row = cells(text, s, e, delimiter);
            if row.len() != names.len() {
                break;
            }
            for (name, &(cs, ce)) in names.iter().zip(&row) {
                let (vs, ve) = unquote(text, cs, ce);
                if ve > vs {
                    if let Some(kind) = judge(name, &text[vs..ve]) {
                        out.push((vs, ve, kind));
                    }
                }
            }
            j += 1;
        }
        i = j;
    }
    out.sort_unstable();
    out
}

fn line_ranges(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' {
            let end = if i > start && text.as_bytes()[i - 1] == b'\r' { i - 1 } else { i };
            out.push((start, end));
            start = i + 1;
        }
    }
    out.push((start, text.len()));
    out
}

/// The table delimiter of a line: `|` for a Markdown row (it starts and ends with one), a tab, or a comma when the
/// line holds at least one and no spaces around the commas look like prose.
fn delimiter_of(line: &str) -> Option<char> {
    let t = line.trim();
    if t.len() > 2 && t.starts_with('|') && t.ends_with('|') {
        return Some('|');
    }
    if t.contains('\t') {
        return Some('\t');
    }
    if t.contains(',') && !t.contains(", ") && !t.contains(['(', ')', ';', '{', '}', '=']) {
        return Some(',');
    }
    None
}

/// A CSV or TSV column name: a short plain name (`temp_password`, `Mgmt IP`), not code or a value.
fn column_name(cell: &str) -> bool {
    let c = cell.trim_matches('"');
    let mut chars = c.chars();
    chars.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.len() <= 40
        && c.chars().all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | ' ' | '.' | '-'))
}

fn is_markdown_rule(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('|') && t.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'))
}

/// The byte ranges of a row's cells (trimmed), honouring double quotes in CSV and TSV.
fn cells(text: &str, start: usize, end: usize, delimiter: char) -> Vec<(usize, usize)> {
    let line = &text[start..end];
    let (mut from, mut to) = (0, line.len());
    if delimiter == '|' {
        let lead = line.len() - line.trim_start().len();
        let trail = line.len() - line.trim_end().len();
        from = lead + 1;
        to = line.len() - trail - 1;
        if to < from {
            return Vec::new();
        }
    }
    let mut out = Vec::new();
    let mut cell_start = from;
    let mut quoted = false;
    for (i, c) in line[from..to].char_indices() {
        let at = from + i;
        if c == '"' && delimiter != '|' {
            quoted = !quoted;
        } else if c == delimiter && !quoted {
            out.push(trim(line, cell_start, at));
            cell_start = at + c.len_utf8();
        }
    }
    out.push(trim(line, cell_start, to));
    out.into_iter().map(|(s, e)| (start + s, start + e)).collect()
}

fn trim(line: &str, s: usize, e: usize) -> (usize, usize) {
    let cell = &line[s..e];
    let lead = cell.len() - cell.trim_start().len();
    let trail = cell.len() - cell.trim_end().len();
    if lead + trail >= cell.len() {
        (s, s)
    } else {
        (s + lead, e - trail)
    }
}

/// A cell without its quotes or Markdown code ticks.
fn unquote(text: &str, s: usize, e: usize) -> (usize, usize) {
    let cell = &text[s..e];
    for q in ['"', '`', '\''] {
        if cell.len() >= 2 && cell.starts_with(q) && cell.ends_with(q) {
            return (s + 1, e - 1);
        }
    }
    (s, e)
}

fn clean_name(cell: &str) -> String {
    cell.trim_matches(|c: char| c == '"' || c == '`' || c == '*' || c == '\'' || c.is_whitespace())
        .to_ascii_lowercase()
        .replace([' ', '-'], "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(name: &str, v: &str) -> Option<&'static str> {
        (name.contains("password") || name == "passphrase").then_some("password_assignment").filter(|_| v.len() > 3)
    }

    fn values(text: &str) -> Vec<&str> {
        secret_spans(text, |n| n.contains("password") || n == "passphrase", judge)
            .into_iter()
            .map(|(s, e, _)| &text[s..e])
            .collect()
    }

    #[test]
    fn markdown_csv_and_tsv_columns() {
        let md = "| Device | User | Password |\n|---|---|---|\n| sw-01 | admin | Sw1tch!Core#01 |\n| ap-3 | ubnt | `ubnt-Flr3-2022` |";
        assert_eq!(values(md), ["Sw1tch!Core#01", "ubnt-Flr3-2022"]);
        let csv = "username,email,temp_password,must_change\njm,j@x.com,Welcome-7731!,TRUE\nlg,l@x.com,\"Welcome,2290!\",TRUE";
        assert_eq!(values(csv), ["Welcome-7731!", "Welcome,2290!"]);
        let tsv = "site\tssid\tpassphrase\nBerlin\tACME\tGaeste-Willkommen-24\nMadrid\tMAD\tOficina Madrid 3ª planta";
        assert_eq!(values(tsv), ["Gaeste-Willkommen-24", "Oficina Madrid 3ª planta"]);
    }

    #[test]
    fn other_tables_and_prose_are_left_alone() {
        assert!(values("| Name | Role |\n|---|---|\n| ann | admin |").is_empty());
        // A row naming a secret is not a header: no rule line under it.
        assert!(values("| Var | Note |\n|---|---|\n| `SESSION_PASSWORD` | yes |\n| `LOG_LEVEL` | defaults to info |")
            .is_empty());
        // Code and JSON lines with commas are not CSV.
        assert!(values("  password: process.env.PGPASSWORD,\n  application_name: 'metrics api',").is_empty());
        assert!(
            values("  \"auth.password.label\": \"Password\",\n  \"auth.password.forgot\": \"Forgot it?\",").is_empty()
        );
        assert!(values("Set the password, then log in, then rotate it.").is_empty());
        // A row with a different number of cells ends the table.
        assert!(values("user,password\nann,s3cret-Value,extra").is_empty());
        // A row may hold `=` or `;` (only the header must be plain names).
        assert_eq!(values("user,password\nalice,Summer=2024;x"), ["Summer=2024;x"]);
    }
}
