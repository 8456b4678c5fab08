//! The text the rules see.

use unicode_normalization::UnicodeNormalization;

pub(super) fn invisible(c: char) -> bool {
    matches!(c,
        '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2065}' | '\u{FEFF}' | '\u{00AD}' | '\u{034F}'
        | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}'
        | '\u{180E}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' | '\u{FFF9}'..='\u{FFFB}'
        | '\u{17B4}' | '\u{17B5}')
}

pub(super) fn combining_mark(c: char) -> bool {
    matches!(c, '\u{0300}'..='\u{036F}' | '\u{1AB0}'..='\u{1AFF}' | '\u{1DC0}'..='\u{1DFF}' | '\u{20D0}'..='\u{20FF}'
        | '\u{FE20}'..='\u{FE2F}')
}

pub(super) fn bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

pub(super) fn tag_char(c: char) -> bool {
    matches!(c, '\u{E0000}'..='\u{E007F}')
}

/// Zero-width characters that, between two Latin letters, split a word to dodge matching.
pub(super) fn word_splitter(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}' | '\u{180E}' | '\u{034F}' | '\u{2061}'..='\u{2064}')
}

/// Cyrillic and Greek letters that look like Latin ones.
pub(super) fn confusable(c: char) -> Option<char> {
    Some(match c {
        'а' => 'a',
        'е' => 'e',
        'о' => 'o',
        'р' => 'p',
        'с' => 'c',
        'у' => 'y',
        'х' => 'x',
        'ѕ' => 's',
        'і' => 'i',
        'ј' => 'j',
        'ԁ' => 'd',
        'ԛ' => 'q',
        'ԝ' => 'w',
        'ӏ' => 'l',
        'һ' => 'h',
        'к' => 'k',
        'м' => 'm',
        'т' => 't',
        'в' => 'b',
        'н' => 'h',
        'А' => 'A',
        'В' => 'B',
        'Е' => 'E',
        'К' => 'K',
        'М' => 'M',
        'Н' => 'H',
        'О' => 'O',
        'Р' => 'P',
        'С' => 'C',
        'Т' => 'T',
        'Х' => 'X',
        'У' => 'Y',
        'Ѕ' => 'S',
        'І' => 'I',
        'Ј' => 'J',
        'α' => 'a',
        'ο' => 'o',
        'ι' => 'i',
        'κ' => 'k',
        'ν' => 'v',
        'ρ' => 'p',
        'τ' => 't',
        'υ' => 'u',
        'χ' => 'x',
        'ε' => 'e',
        'Α' => 'A',
        'Β' => 'B',
        'Ε' => 'E',
        'Ζ' => 'Z',
        'Η' => 'H',
        'Ι' => 'I',
        'Κ' => 'K',
        'Μ' => 'M',
        'Ν' => 'N',
        'Ο' => 'O',
        'Ρ' => 'P',
        'Τ' => 'T',
        'Υ' => 'Y',
        'Χ' => 'X',
        'ı' => 'i',
        'ɑ' => 'a',
        'ɡ' => 'g',
        'ǀ' => 'l',
        'օ' => 'o',
        'ս' => 'u',
        'ց' => 'g',
        'հ' => 'h',
        'ո' => 'n',
        _ => return None,
    })
}

fn fold_punctuation(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' | '\u{02BC}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' | '\u{00AB}' | '\u{00BB}' => '"',
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        '\u{2028}' | '\u{2029}' | '\u{000B}' | '\u{000C}' | '\u{0085}' | '\r' => '\n',
        c => c,
    }
}

pub(super) struct Normalized {
    pub(super) text: String,
    /// The first word mixing Latin letters with Cyrillic/Greek look-alikes, before folding.
    pub(super) mixed_script: Option<String>,
    /// How many words mix Latin letters with look-alikes.
    pub(super) mixed_words: usize,
    /// How many `%XX`, `&...;` and `\u`/`\x`/`\U` escapes were decoded.
    pub(super) decoded_escapes: usize,
}

pub(super) fn normalize(text: &str) -> Normalized {
    // Escapes first: they can spell tag characters, invisibles and look-alikes as well as words.
    let (decoded, decoded_escapes) = decode_escapes(text);
    let text = decoded.as_str();
    // Tag characters: their ASCII payload goes to a hidden line, one line per run.
    let mut visible = String::with_capacity(text.len());
    let mut hidden = String::new();
    let mut in_tags = false;
    for c in text.chars() {
        if tag_char(c) {
            if !in_tags && !hidden.is_empty() {
                hidden.push('\n');
            }
            in_tags = true;
            let cp = c as u32;
            if (0xE0020..=0xE007E).contains(&cp) {
                hidden.push(char::from((cp - 0xE0000) as u8));
            }
            continue;
        }
        in_tags = false;
        if !invisible(c) {
            visible.push(c);
        }
    }
    if !hidden.is_empty() {
        visible.push('\n');
        visible.push_str(&hidden);
    }

    // NFKC, punctuation folding, whitespace collapsed (newlines kept, as line starts matter).
    let mut folded = String::with_capacity(visible.len());
    let visible = visible.replace("\r\n", "\n");
    let composed = if visible.is_ascii() { visible } else { fold_marks(&visible) };
    for c in composed.chars() {
        if invisible(c) {
            continue;
        }
        let c = fold_punctuation(c);
        if combining_mark(c) {
            continue; // defensive: fold_marks already dropped them
        }
        if c == '*' || c == '`' {
            continue; // emphasis and code marks split phrases: "**ignore** all previous instructions"
        }
        if c == '\n' {
            while folded.ends_with(' ') {
                folded.pop();
            }
            folded.push('\n');
        } else if c.is_whitespace() {
            if !(folded.is_empty() || folded.ends_with(' ') || folded.ends_with('\n')) {
                folded.push(' ');
            }
        } else {
            folded.push(c);
        }
    }

    // Look-alike letters inside Latin words become Latin.
    let mut out = String::with_capacity(folded.len());
    let mut mixed = (None, 0usize);
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String, mixed: &mut (Option<String>, usize)| {
        let latin = word.chars().filter(|c| c.is_ascii_alphabetic()).count();
        let looks = word.chars().filter(|&c| confusable(c).is_some()).count();
        if latin >= 1 && looks >= 1 && latin + looks >= 3 {
            // Turkish writes dotless ı in ordinary words: folded, but not evidence of obfuscation.
            if word.chars().any(|c| c != 'ı' && confusable(c).is_some()) {
                mixed.0.get_or_insert_with(|| word.clone());
                mixed.1 += 1;
            }
            out.extend(word.chars().map(|c| confusable(c).unwrap_or(c)));
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in folded.chars() {
        if c.is_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out, &mut mixed);
            out.push(c);
        }
    }
    flush(&mut word, &mut out, &mut mixed);
    let (mixed_script, mixed_words) = mixed;
    Normalized { text: out, mixed_script, mixed_words, decoded_escapes }
}

/// The text rules match against: `%XX`, HTML entities and `\u`/`\x`/`\U` escapes decoded (twice at most), tag
/// characters decoded (their hidden text appended on its own line),
/// invisible characters removed, NFKD with the Latin/Greek/Cyrillic combining marks dropped (accents
/// too: "précédentes" becomes "precedentes", "İgnore" becomes "Ignore") and then NFC (Hangul and kana recompose), ASCII quotes and dashes, `*` and
/// backticks dropped, look-alike letters inside Latin words folded to Latin, whitespace runs collapsed to one
/// space (line breaks kept).
pub fn normalize_for_screening(text: &str) -> String {
    normalize(text).text
}

/// NFKD, combining marks dropped, NFC: full-width and styled letters fold to ASCII, accents and stacked marks
/// ("ï̸g̷n̴o̵r̶e", the dot of "İ") go, Hangul syllables and kana recompose. Rule patterns and needles get the
/// same fold, so a rule written with accents still matches.
pub(crate) fn fold_marks(text: &str) -> String {
    if text.is_ascii() {
        return text.to_string();
    }
    text.nfkd().filter(|&c| !combining_mark(c)).nfc().collect()
}

/// Named HTML entities worth decoding: markup, quotes and spaces, and the letters attackers spell with them.
fn named_entity(name: &str) -> Option<char> {
    Some(match name {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" | "ensp" | "emsp" | "thinsp" => ' ',
        "lsquo" | "rsquo" | "sbquo" => '\'',
        "ldquo" | "rdquo" | "bdquo" => '"',
        "ndash" | "mdash" | "minus" => '-',
        "colon" => ':',
        "sol" => '/',
        "bsol" => '\\',
        "lpar" => '(',
        "rpar" => ')',
        "lbrack" | "lsqb" => '[',
        "rbrack" | "rsqb" => ']',
        "lbrace" | "lcub" => '{',
        "rbrace" | "rcub" => '}',
        "excl" => '!',
        "quest" => '?',
        "period" => '.',
        "comma" => ',',
        "semi" => ';',
        "equals" => '=',
        "num" => '#',
        "percnt" => '%',
        "commat" => '@',
        "verbar" | "vert" => '|',
        "lowbar" => '_',
        "ast" => '*',
        "grave" => '`',
        "Hat" => '^',
        "tilde" => '~',
        "zwsp" | "zwj" | "zwnj" | "shy" | "lrm" | "rlm" => '\u{200B}',
        "newline" => '\n',
        "tab" => '\t',
        _ => {
            // Accented letters: &eacute; &Iuml; &ccedil; &ntilde; &aring; &oslash; ...
            let (base, accent) = name.split_at(1);
            let base = base.chars().next()?;
            if base.is_ascii_alphabetic()
                && matches!(
                    accent,
                    "acute" | "grave" | "circ" | "uml" | "tilde" | "ring" | "cedil" | "slash" | "caron" | "dot"
                )
            {
                base
            } else {
                return None;
            }
        }
    })
}

/// Decodes `%XX` runs (as UTF-8), HTML entities (named and numeric), `\uXXXX` (with surrogate pairs),
/// `\u{X...}`, `\UXXXXXXXX` and `\xXX` runs (as UTF-8). Up to three passes for double encoding (`%2569`),
/// each linear in the text. Control characters other than tab and newline are dropped. Returns the text and the
/// number of escapes decoded.
pub(super) fn decode_escapes(text: &str) -> (String, usize) {
    if !text.contains(['%', '&', '\\']) {
        return (text.to_string(), 0);
    }
    let mut out = text.to_string();
    let mut total = 0;
    for _ in 0..3 {
        let (next, n) = decode_pass(&out);
        total += n;
        out = next;
        if n == 0 || !out.contains(['%', '&', '\\']) {
            break;
        }
    }
    (out, total)
}

fn hex_val(b: u8) -> Option<u32> {
    (b as char).to_digit(16)
}

/// `n` hex digits at `b[at..]`.
fn hex_at(b: &[u8], at: usize, n: usize) -> Option<u32> {
    if at + n > b.len() {
        return None;
    }
    b[at..at + n].iter().try_fold(0u32, |acc, &d| Some(acc * 16 + hex_val(d)?))
}

fn push_decoded(out: &mut String, c: char) {
    if !c.is_control() || c == '\n' || c == '\t' {
        out.push(c);
    }
}

fn decode_pass(text: &str) -> (String, usize) {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut count = 0;
    let mut i = 0;
    let mut bytes = Vec::new();
    // A run of byte escapes (%XX or \xXX) decodes as UTF-8; an invalid run is kept as written.
    let flush_bytes = |bytes: &mut Vec<u8>, raw_start: usize, raw_end: usize, out: &mut String, count: &mut usize| {
        if bytes.is_empty() {
            return;
        }
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                *count += bytes.len();
                s.chars().for_each(|c| push_decoded(out, c));
            }
            Err(_) => out.push_str(&text[raw_start..raw_end]),
        }
        bytes.clear();
    };
    while i < b.len() {
        // Byte escapes: collect a run.
        let run_start = i;
        loop {
            if b.get(i) == Some(&b'%') {
                if let Some(v) = hex_at(b, i + 1, 2) {
                    bytes.push(v as u8);
                    i += 3;
                    continue;
                }
            } else if b.get(i) == Some(&b'\\') && matches!(b.get(i + 1), Some(b'x' | b'X')) {
                if let Some(v) = hex_at(b, i + 2, 2) {
                    bytes.push(v as u8);
                    i += 4;
                    continue;
                }
            }
            break;
        }
        if i > run_start {
            flush_bytes(&mut bytes, run_start, i, &mut out, &mut count);
            continue;
        }
        match b[i] {
            b'\\' if matches!(b.get(i + 1), Some(b'u')) => {
                if b.get(i + 2) == Some(&b'{') {
                    let close = b[i + 3..].iter().take(7).position(|&c| c == b'}');
                    if let Some(len) = close.filter(|&l| l > 0) {
                        if let Some(c) = hex_at(b, i + 3, len).and_then(char::from_u32) {
                            push_decoded(&mut out, c);
                            count += 1;
                            i += 4 + len;
                            continue;
                        }
                    }
                } else if let Some(v) = hex_at(b, i + 2, 4) {
                    if (0xD800..0xDC00).contains(&v) && b.get(i + 6) == Some(&b'\\') && b.get(i + 7) == Some(&b'u') {
                        if let Some(lo) = hex_at(b, i + 8, 4).filter(|lo| (0xDC00..0xE000).contains(lo)) {
                            let c = char::from_u32(0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00));
                            if let Some(c) = c {
                                push_decoded(&mut out, c);
                                count += 1;
                                i += 12;
                                continue;
                            }
                        }
                    }
                    if let Some(c) = char::from_u32(v) {
                        push_decoded(&mut out, c);
                        count += 1;
                        i += 6;
                        continue;
                    }
                }
            }
            b'\\' if matches!(b.get(i + 1), Some(b'U')) => {
                if let Some(c) = hex_at(b, i + 2, 8).and_then(char::from_u32) {
                    push_decoded(&mut out, c);
                    count += 1;
                    i += 10;
                    continue;
                }
            }
            b'&' => {
                // &name; or &#NNN; or &#xHH; within 12 bytes.
                let semi = b[i + 1..].iter().take(12).position(|&c| c == b';');
                if let Some(len) = semi.filter(|&l| l > 0) {
                    let body = &text[i + 1..i + 1 + len];
                    let c = if let Some(num) = body.strip_prefix('#') {
                        match num.strip_prefix(['x', 'X']) {
                            Some(h) => u32::from_str_radix(h, 16).ok(),
                            None => num.parse::<u32>().ok(),
                        }
                        .and_then(char::from_u32)
                    } else if body.bytes().all(|c| c.is_ascii_alphanumeric()) {
                        named_entity(body)
                    } else {
                        None
                    };
                    if let Some(c) = c {
                        push_decoded(&mut out, c);
                        count += 1;
                        i += len + 2;
                        continue;
                    }
                }
            }
            _ => {}
        }
        // Copy one character.
        let ch_len = text[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&text[i..i + ch_len]);
        i += ch_len;
    }
    (out, count)
}
