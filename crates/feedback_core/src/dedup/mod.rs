//! Comparing two lessons of one task_type: is the newer one a rewording of the older (`duplicate`, merge it), a
//! correction that changes it (`revision`, it supersedes the older, never merges into it), or another lesson on
//! the same topic (`distinct`, both stay)?
//!
//! Cosine similarity sees the topic, not the claim: "Prefer tabs over spaces" and "Prefer spaces over tabs" are
//! 0.99 apart. So the two texts are aligned word by word ([`align`]) and what differs is read ([`differences`]):
//! negation and polarity, numbers and bounds, versions, identifiers, code spans and tool names, the order of
//! compared items, scope words, "no longer" markers and antonyms common in review lessons. [`compare`] turns the
//! differences, the word overlap and the cosines into a verdict with a model ([`Calibrated`]) fitted on a corpus
//! of labelled pairs (`data/dedup/pairs`, [`fit`]).

mod lexicon;
mod tokens;

use serde::Serialize;

pub use tokens::{tokenize, Class, Token};

/// What a newer lesson is to an older one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Says the same thing in other words: merged (a counted report on the older note).
    Duplicate,
    /// Reverses or changes the older lesson: it supersedes it.
    Revision,
    /// Another lesson on the same topic: both stay.
    Distinct,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Duplicate => "duplicate",
            Verdict::Revision => "revision",
            Verdict::Distinct => "distinct",
        }
    }
}

/// Why two texts differ where they do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// One says no / not / never / avoid where the other does not.
    Negation,
    /// One says the old practice no longer holds (no longer, deprecated, stop, anymore).
    NoLonger,
    /// The compared or contrasted items swapped places ("A over B" / "B over A").
    SwappedComparison,
    /// A number, duration, size or count changed.
    Number,
    /// A bound turned around (at least / at most, minimum / maximum, before / after).
    Bound,
    /// A version changed (v1 / v2, 3.11 / 3.12).
    Version,
    /// An identifier, code span, quoted string or tool name on one side only.
    Identifier,
    /// The scope changed (only, except, every, in tests ...).
    Scope,
    /// A word turned into its opposite (safe / unsafe, allow / deny, enable / disable ...).
    Antonym,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Negation => "negation",
            Change::NoLonger => "no_longer",
            Change::SwappedComparison => "swapped_comparison",
            Change::Number => "changed_number",
            Change::Bound => "changed_bound",
            Change::Version => "changed_version",
            Change::Identifier => "changed_identifier",
            Change::Scope => "scope_change",
            Change::Antonym => "antonym",
        }
    }

    /// Changes that turn a lesson into another claim even when the rest is reworded.
    fn contradicts(self) -> bool {
        !matches!(self, Change::Identifier)
    }
}

/// One difference between the older text (`a`) and the newer one (`b`): the words on each side and why they count.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub change: Change,
    pub a: String,
    pub b: String,
}

/// The word alignment of two texts, and what it says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alignment {
    /// Share of content words of the shorter text that the alignment matches in the other.
    pub overlap: f64,
    /// Share of all content words (both texts) left unmatched.
    pub unmatched: f64,
    /// The differing stretches: words of `a` replaced by words of `b` (either side may be empty).
    pub hunks: Vec<(Vec<Token>, Vec<Token>)>,
}

/// What decides a verdict, fitted on the tune authors of `data/dedup/pairs` and shipped as data
/// (`data/dedup/compare.json`): pairs below `neighbour` cosine are never compared; above it, the pair merges when
/// the learned probability that it is a rewording reaches `merge.threshold`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Calibrated {
    pub neighbour: f64,
    pub merge: crate::rank::decide::Decision,
    /// A pair that does not merge is a revision only at or above this cosine and word overlap (and with a
    /// difference found): below, the newer note is another lesson and both stay. Chosen on the tune authors: most
    /// revisions edit the older lesson, while lessons on one topic that differ somewhere abound.
    #[serde(default = "default_revision_similarity")]
    pub revision_similarity: f64,
    #[serde(default = "default_revision_overlap")]
    pub revision_overlap: f64,
}

fn default_revision_similarity() -> f64 {
    0.85
}

fn default_revision_overlap() -> f64 {
    0.3
}

impl Calibrated {
    /// The lowest cosine at which a pair can be anything but distinct (a light edit, a merge by the model or a
    /// revision): nearest neighbours below it are not compared at all.
    pub fn decisive(&self) -> f64 {
        MERGE_FLOOR.min(self.revision_similarity).min(EDIT_DUPLICATE).max(self.neighbour)
    }

    /// Whether the model reads the features this build computes.
    pub fn fits_this_build(&self) -> bool {
        let m = &self.merge;
        m.features.iter().map(String::as_str).eq(FEATURES.iter().copied())
            && [m.mean.len(), m.scale.len(), m.weights.len()].iter().all(|&n| n == FEATURES.len())
    }
}

/// The merge model's features, in order.
pub const FEATURES: [&str; 13] = [
    "cosine",
    "residual_cosine",
    "overlap",
    "overlap_x_cosine",
    "negation",
    "no_longer",
    "swapped_comparison",
    "changed_number",
    "changed_bound",
    "changed_version",
    "changed_identifier",
    "scope_change",
    "antonym",
];

/// The feature row of a pair: the cosine of the two lessons, the cosine of what differs ([`residuals`]), the word
/// overlap, and one flag per kind of difference found.
pub fn features(similarity: f64, residual: f64, alignment: &Alignment, differences: &[Difference]) -> Vec<f64> {
    let has = |c: Change| differences.iter().any(|d| d.change == c) as u8 as f64;
    vec![
        similarity,
        residual,
        alignment.overlap,
        alignment.overlap * similarity,
        has(Change::Negation),
        has(Change::NoLonger),
        has(Change::SwappedComparison),
        has(Change::Number),
        has(Change::Bound),
        has(Change::Version),
        has(Change::Identifier),
        has(Change::Scope),
        has(Change::Antonym),
    ]
}

/// What each text says apart from what both share: the words of its differing stretches (`"-"` when none), to be
/// embedded; their cosine is the `residual_cosine` feature. A rewording differs everywhere and its residuals
/// still mean the same; two lessons on one topic share a frame and differ in exactly what they claim.
pub fn residuals(a: &str, b: &str) -> (String, String) {
    let al = align(a, b);
    let side = |first: bool| {
        let words: Vec<&str> =
            al.hunks.iter().flat_map(|(x, y)| if first { x } else { y }).map(|t| t.raw.as_str()).collect();
        if words.is_empty() {
            "-".to_string()
        } else {
            words.join(" ")
        }
    };
    (side(true), side(false))
}

/// The verdict on a newer lesson `b` against an older one `a` whose embeddings have cosine `similarity`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub verdict: Verdict,
    pub similarity: f64,
    /// For a revision, the kind of change that decided it.
    pub kind: Option<Change>,
    pub overlap: f64,
    pub differences: Vec<Difference>,
    /// One sentence: why the verdict.
    pub why: String,
}

/// Aligns the content words of two texts (longest common subsequence of normalised words).
pub fn align(a: &str, b: &str) -> Alignment {
    let ta = tokenize(a);
    let tb = tokenize(b);
    let (n, m) = (ta.len(), tb.len());
    // LCS table over normalised words; texts are capped by the tokenizer.
    let mut dp = vec![vec![0u16; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            dp[i][j] = if ta[i].norm == tb[j].norm { dp[i + 1][j + 1] + 1 } else { dp[i + 1][j].max(dp[i][j + 1]) };
        }
    }
    let mut hunks = Vec::new();
    let (mut i, mut j) = (0, 0);
    let (mut da, mut db) = (Vec::new(), Vec::new());
    let mut matched_content = 0usize;
    while i < n || j < m {
        if i < n && j < m && ta[i].norm == tb[j].norm {
            if !da.is_empty() || !db.is_empty() {
                hunks.push((std::mem::take(&mut da), std::mem::take(&mut db)));
            }
            if ta[i].is_content() {
                matched_content += 1;
            }
            i += 1;
            j += 1;
        } else if j >= m || (i < n && dp[i + 1][j] >= dp[i][j + 1]) {
            da.push(ta[i].clone());
            i += 1;
        } else {
            db.push(tb[j].clone());
            j += 1;
        }
    }
    if !da.is_empty() || !db.is_empty() {
        hunks.push((da, db));
    }
    let ca = ta.iter().filter(|t| t.is_content()).count();
    let cb = tb.iter().filter(|t| t.is_content()).count();
    let shorter = ca.min(cb).max(1) as f64;
    let total = (ca + cb).max(1) as f64;
    Alignment {
        overlap: (matched_content as f64 / shorter).min(1.0),
        unmatched: 1.0 - (2 * matched_content) as f64 / total,
        hunks,
    }
}

fn join(tokens: &[Token]) -> String {
    tokens.iter().map(|t| t.raw.as_str()).collect::<Vec<_>>().join(" ")
}

fn count(tokens: &[Token], pred: impl Fn(&Token) -> bool) -> usize {
    tokens.iter().filter(|t| pred(t)).count()
}

/// What differs between `a` (older) and `b` (newer), each difference once per kind, in a stable order.
pub fn differences(a: &str, b: &str, alignment: &Alignment) -> Vec<Difference> {
    let ta = tokenize(a);
    let tb = tokenize(b);
    let mut out: Vec<Difference> = Vec::new();
    let mut push = |change: Change, x: String, y: String| {
        if !out.iter().any(|d| d.change == change) {
            out.push(Difference { change, a: x, b: y });
        }
    };

    // Polarity: the number of negations differs in parity over the whole texts, and a negation sits in a
    // differing stretch (a rewording that moves a "not" keeps its parity).
    let neg_a = count(&ta, |t| lexicon::is_negation(&t.norm));
    let neg_b = count(&tb, |t| lexicon::is_negation(&t.norm));
    let neg_in_hunk = alignment.hunks.iter().any(|(x, y)| x.iter().chain(y).any(|t| lexicon::is_negation(&t.norm)));
    // In an edit of one lesson (most words shared), a stretch that gains or loses a negation.
    let negs = |ts: &[Token]| ts.iter().filter(|t| lexicon::is_negation(&t.norm)).count();
    let unbalanced = alignment.hunks.iter().any(|(x, y)| negs(x) != negs(y));
    let no_longer_b = lexicon::no_longer(&tb) && !lexicon::no_longer(&ta);
    let no_longer_a = lexicon::no_longer(&ta) && !lexicon::no_longer(&tb);
    if no_longer_b || no_longer_a {
        let (x, y) = if no_longer_b {
            (String::new(), lexicon::no_longer_span(&tb))
        } else {
            (lexicon::no_longer_span(&ta), String::new())
        };
        push(Change::NoLonger, x, y);
    } else if neg_a % 2 != neg_b % 2 && neg_in_hunk || alignment.overlap >= 0.5 && unbalanced {
        let span = |ts: &[Token]| {
            ts.iter().filter(|t| lexicon::is_negation(&t.norm)).map(|t| t.raw.clone()).collect::<Vec<_>>().join(" ")
        };
        push(Change::Negation, span(&ta), span(&tb));
    }

    // Numbers and versions: a value on one side that the other never mentions.
    for class in [Class::Number, Class::Version] {
        let va: Vec<&Token> = ta.iter().filter(|t| t.class == class).collect();
        let vb: Vec<&Token> = tb.iter().filter(|t| t.class == class).collect();
        let only_a = va.iter().any(|t| !vb.iter().any(|u| u.value == t.value));
        let only_b = vb.iter().any(|t| !va.iter().any(|u| u.value == t.value));
        // The same values in another order ("v2 ...; v1 is deprecated" / "v1 ...; v2 is deprecated") too.
        let reordered = va.len() == vb.len() && va.len() > 1 && va.iter().zip(&vb).any(|(x, y)| x.value != y.value);
        if only_a && !vb.is_empty() || only_b && !va.is_empty() || reordered {
            let show = |v: &[&Token]| v.iter().map(|t| t.raw.as_str()).collect::<Vec<_>>().join(" ");
            push(if class == Class::Number { Change::Number } else { Change::Version }, show(&va), show(&vb));
        }
    }

    // Bounds and antonyms: one word of an opposed pair deleted, the other inserted (or present on that side only).
    for (x, y) in &alignment.hunks {
        if let Some((p, q)) = lexicon::opposed(x, y, &ta, &tb) {
            let change = if lexicon::is_bound(&p) || lexicon::is_bound(&q) { Change::Bound } else { Change::Antonym };
            push(change, p, q);
        }
    }

    // Swapped comparison: two words both texts share, in opposite order, around a comparison marker.
    if let Some((p, q)) = swapped(&ta, &tb) {
        push(Change::SwappedComparison, format!("{p} … {q}"), format!("{q} … {p}"));
    }

    // Scope: a word restricting where the lesson applies (only, except, unless ...) on one side only; or, in an
    // edit of one lesson (high overlap), a word saying it applies everywhere (every, all, always ...).
    let words = |ts: &[Token], pred: fn(&str) -> bool| {
        ts.iter().filter(|t| pred(&t.norm)).map(|t| t.raw.clone()).collect::<Vec<_>>().join(" ")
    };
    let restrict = (words(&ta, lexicon::is_restrict), words(&tb, lexicon::is_restrict));
    let universal = (words(&ta, lexicon::is_universal), words(&tb, lexicon::is_universal));
    if restrict.0.is_empty() != restrict.1.is_empty() {
        push(Change::Scope, restrict.0, restrict.1);
    } else if universal.0.is_empty() != universal.1.is_empty() && alignment.overlap >= EDIT_OVERLAP {
        push(Change::Scope, universal.0, universal.1);
    }

    // Identifiers: a code span, quoted string, tool or proper name on one side that the other never mentions, in
    // a stretch that replaces something (a name swapped for another), or, in an edit of one lesson, added or
    // dropped ("FOR UPDATE" / "FOR UPDATE SKIP LOCKED").
    for (x, y) in &alignment.hunks {
        let new_in =
            |side: &[Token], other: &[Token]| side.iter().any(|t| t.class == Class::Identifier && !mentioned(t, other));
        let content = |side: &[Token]| side.iter().any(|t| t.is_content());
        let (nx, ny) = (new_in(x, &tb), new_in(y, &ta));
        let replaced = nx && (ny || content(y)) || ny && (nx || content(x));
        if replaced || (nx || ny) && alignment.overlap >= EDIT_OVERLAP {
            push(Change::Identifier, join(x), join(y));
        }
    }
    out.sort_by_key(|d| d.change);
    out
}

/// Whether a text mentions a token: the same word, or a hyphenated one written apart ("numeric-looking" /
/// "numeric looking").
fn mentioned(t: &Token, other: &[Token]) -> bool {
    if other.iter().any(|u| u.norm == t.norm) {
        return true;
    }
    let parts: Vec<String> = t.raw.to_lowercase().split('-').filter(|p| !p.is_empty()).map(str::to_string).collect();
    parts.len() > 1 && other.windows(parts.len()).any(|w| w.iter().zip(&parts).all(|(u, p)| u.raw.to_lowercase() == *p))
}

/// Two content words shared by both texts whose order flips, in texts that compare or contrast (over,
/// instead of, rather than, not, vs, before, after, prefer).
fn swapped(ta: &[Token], tb: &[Token]) -> Option<(String, String)> {
    if !ta.iter().chain(tb).any(|t| lexicon::is_comparison(&t.norm)) {
        return None;
    }
    let first = |ts: &[Token], w: &str| ts.iter().position(|t| t.norm == w);
    let shared: Vec<(&Token, usize, usize)> = ta
        .iter()
        .filter(|t| t.is_content() && !lexicon::is_comparison(&t.norm))
        .filter_map(|t| Some((t, first(ta, &t.norm)?, first(tb, &t.norm)?)))
        .collect();
    for (i, (p, pa, pb)) in shared.iter().enumerate() {
        for (q, qa, qb) in &shared[i + 1..] {
            if p.norm != q.norm && (pa < qa) != (pb < qb) && pa != qa {
                // The two must sit on either side of a comparison marker in both texts.
                let around = |ts: &[Token], x: usize, y: usize| {
                    let (lo, hi) = (x.min(y), x.max(y));
                    ts[lo..=hi].iter().any(|t| lexicon::is_comparison(&t.norm))
                };
                if around(ta, *pa, *qa) && around(tb, *pb, *qb) {
                    return Some((p.raw.clone(), q.raw.clone()));
                }
            }
        }
    }
    None
}

/// The verdict on a newer lesson `b` against an older `a`, given the cosine of their embeddings and of their
/// [`residuals`]. A pair merges only when the model says it is a rewording; otherwise any difference found makes
/// it a revision (the newer supersedes the older, once approved) and a pair with none is distinct.
pub fn compare(a: &str, b: &str, similarity: f64, residual: f64, model: &Calibrated) -> Comparison {
    let alignment = align(a, b);
    let differences = differences(a, b, &alignment);
    let overlap = alignment.overlap;
    let bound = model.decisive();
    let (verdict, kind, why) = if normalize(a) == normalize(b) {
        (Verdict::Duplicate, None, "the same text".to_string())
    } else if similarity < bound {
        (
            Verdict::Distinct,
            None,
            format!("similarity {similarity:.3} is below {bound:.2}: too far apart to merge or revise"),
        )
    } else if light_edit(similarity, &alignment, &differences) {
        // The same lesson with a word or two added, dropped or swapped for a synonym, and no difference in what it
        // claims (a changed name, number, negation ... is a difference).
        (Verdict::Duplicate, None, format!("the same lesson lightly edited (similarity {similarity:.3})"))
    } else {
        let p = model.merge.predict(&[features(similarity, residual, &alignment, &differences)])[0];
        // A difference in what the lessons claim vetoes a merge: a correction is never folded into the lesson it
        // corrects, whatever the model says of the pair.
        if p >= model.merge.threshold && vetoing(&alignment, &differences).is_none() && similarity >= MERGE_FLOOR {
            (Verdict::Duplicate, None, format!("a rewording (p {p:.2} >= {:.2})", model.merge.threshold))
        } else if let Some(c) = differences
            .iter()
            .map(|d| d.change)
            .filter(|c| c.contradicts())
            .chain(differences.iter().map(|d| d.change).filter(|c| !c.contradicts()))
            .find(|c| {
                // A polarity flip in a loosely reworded pair is weak evidence (negations move when a lesson is
                // rephrased), and so is a changed name: only in an edit of the older lesson do they make a revision.
                let needed = match c {
                    Change::Negation => NEGATION_OVERLAP,
                    Change::Identifier => EDIT_OVERLAP,
                    _ => model.revision_overlap,
                };
                overlap >= needed
            })
            .filter(|_| similarity >= model.revision_similarity)
        {
            (Verdict::Revision, Some(c), format!("{} differs (p rewording {p:.2})", c.as_str()))
        } else {
            (Verdict::Distinct, None, format!("another lesson on the topic (p rewording {p:.2})"))
        }
    };
    Comparison { verdict, similarity, kind, overlap, differences, why }
}

/// A word or two added, dropped or swapped in the same lesson, nothing it claims changed, the cosine high.
fn light_edit(similarity: f64, alignment: &Alignment, differences: &[Difference]) -> bool {
    let unmatched = |first: bool| {
        alignment.hunks.iter().flat_map(|(x, y)| if first { x } else { y }).filter(|t| t.is_content()).count()
    };
    differences.is_empty()
        && similarity >= EDIT_DUPLICATE
        && unmatched(true) <= EDIT_WORDS
        && unmatched(false) <= EDIT_WORDS
}

/// The difference that forbids a merge: any change of what the lesson claims, or, in an edit of the older lesson,
/// a changed name.
fn vetoing(alignment: &Alignment, differences: &[Difference]) -> Option<Change> {
    let contradiction = differences.iter().find(|d| d.change.contradicts()).map(|d| d.change);
    contradiction.or(differences.first().map(|d| d.change).filter(|_| alignment.overlap >= EDIT_OVERLAP))
}

/// Whether [`compare`] reads the residual cosine for this pair: only the merge model does, and only for a pair it
/// could merge (near enough, no vetoing difference, not already a light edit). The database embeds the residuals
/// of those pairs only.
pub fn needs_residual(a: &str, b: &str, similarity: f64, model: &Calibrated) -> bool {
    if normalize(a) == normalize(b) || similarity < model.decisive().max(MERGE_FLOOR) {
        return false;
    }
    let alignment = align(a, b);
    let differences = differences(a, b, &alignment);
    !light_edit(similarity, &alignment, &differences) && vetoing(&alignment, &differences).is_none()
}

/// Fits the merge model on labelled pairs (feature rows, and whether each is a duplicate) whose cosine reaches
/// `neighbour`: the threshold is the lowest probability that at most `false_merges` of the other pairs reach.
pub fn fit(rows: &[Vec<f64>], duplicate: &[bool], neighbour: f64, false_merges: f64) -> Calibrated {
    let keep: Vec<usize> = (0..rows.len()).filter(|&i| rows[i][0] >= neighbour).collect();
    let x: Vec<Vec<f64>> = keep.iter().map(|&i| rows[i].clone()).collect();
    let y: Vec<bool> = keep.iter().map(|&i| duplicate[i]).collect();
    let mut merge = crate::rank::decide::fit_named(&FEATURES, &x, &y, 1.0, 1.0);
    let mut others: Vec<f64> = merge.predict(&x).into_iter().zip(&y).filter(|(_, d)| !**d).map(|(p, _)| p).collect();
    others.sort_by(f64::total_cmp);
    let allowed = (others.len() as f64 * false_merges).floor() as usize;
    merge.threshold = match others.len().checked_sub(allowed + 1) {
        Some(i) => (others[i] + 1e-6).min(1.0),
        None => 0.5,
    };
    Calibrated {
        neighbour,
        merge,
        revision_similarity: default_revision_similarity(),
        revision_overlap: default_revision_overlap(),
    }
}

/// The model merges no pair below this cosine: below it, lessons that share a task_type's vocabulary and little
/// else (a store is full of them) look like rewordings to it. Chosen on the tune authors' merged rewordings (all
/// but one at 0.87 or above) and on generated notes of random words, which it merged at 0.78-0.85.
const MERGE_FLOOR: f64 = 0.87;

/// Word overlap at or above which a negation alone makes a revision.
const NEGATION_OVERLAP: f64 = 0.6;

/// Cosine at or above which a lesson with at most [`EDIT_WORDS`] content words changed on either side and no
/// difference found is a rewording of the older one.
const EDIT_DUPLICATE: f64 = 0.95;
const EDIT_WORDS: usize = 2;

/// Word overlap at or above which a changed identifier alone makes an edit of the older lesson a revision.
const EDIT_OVERLAP: f64 = 0.6;

fn normalize(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

#[cfg(test)]
mod tests;
