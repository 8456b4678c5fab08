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

/// Removes combining marks from words where most letters carry them ("Zalgo" text: ï̸g̷n̴o̵r̶e̷), keeping
/// ordinary accents (précédentes). Returns NFD text when it changes anything.
fn strip_decorative_marks(text: &str) -> String {
    if !text.chars().any(combining_mark) {
        return text.to_string(); // decorative marks come as combining characters in the raw text
    }
    let decomposed: Vec<char> = text.nfd().collect();
    let mut out = String::with_capacity(text.len());
    let mut start = 0;
    while start < decomposed.len() {
        let mut end = start;
        while end < decomposed.len() && (decomposed[end].is_alphanumeric() || combining_mark(decomposed[end])) {
            end += 1;
        }
        if end == start {
            out.push(decomposed[start]);
            start += 1;
            continue;
        }
        let word = &decomposed[start..end];
        let letters = word.iter().filter(|c| c.is_alphanumeric()).count();
        let marked = word.windows(2).filter(|w| w[0].is_alphanumeric() && combining_mark(w[1])).count();
        let decorative = marked >= 3 && marked * 2 >= letters;
        out.extend(word.iter().filter(|&&c| !(decorative && combining_mark(c))));
        start = end;
    }
    out
}

pub(super) struct Normalized {
    pub(super) text: String,
    /// The first word mixing Latin letters with Cyrillic/Greek look-alikes, before folding.
    pub(super) mixed_script: Option<String>,
}

pub(super) fn normalize(text: &str) -> Normalized {
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
    let visible = strip_decorative_marks(&visible.replace("\r\n", "\n"));
    let composed: Box<dyn Iterator<Item = char>> =
        if visible.is_ascii() { Box::new(visible.chars()) } else { Box::new(visible.nfkc()) };
    for c in composed {
        if invisible(c) {
            continue;
        }
        let c = fold_punctuation(c);
        if combining_mark(c) {
            continue; // marks left after NFKC are stacked or decorative: "ï̸g̷n̴o̵r̶e"
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
    let mut mixed_script = None;
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String, mixed: &mut Option<String>| {
        let latin = word.chars().filter(|c| c.is_ascii_alphabetic()).count();
        let looks = word.chars().filter(|&c| confusable(c).is_some()).count();
        if latin >= 1 && looks >= 1 && latin + looks >= 3 {
            if mixed.is_none() {
                *mixed = Some(word.clone());
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
            flush(&mut word, &mut out, &mut mixed_script);
            out.push(c);
        }
    }
    flush(&mut word, &mut out, &mut mixed_script);
    Normalized { text: out, mixed_script }
}

/// The text rules match against: tag characters decoded (their hidden text appended on its own line),
/// invisible characters and decorative combining marks removed, NFKC, ASCII quotes and dashes, `*` and
/// backticks dropped, look-alike letters inside Latin words folded to Latin, whitespace runs collapsed to one
/// space (line breaks kept).
pub fn normalize_for_screening(text: &str) -> String {
    normalize(text).text
}
