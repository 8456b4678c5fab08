//! The phrase rules: each one a regex, its prefilter needles and an optional context check, declared together.

use std::sync::LazyLock;

use regex::{Regex, RegexBuilder};

use super::normalize::fold_marks;
use super::{EXFILTRATION, OVERRIDE, ROLE_MARKER, STEERING, TOOL_CALL};
use crate::guard::Severity;

/// A context check on a match: `(text, start, end) -> keep`.
type Check = fn(&str, usize, usize) -> bool;

pub(super) struct Rule {
    pub(super) name: &'static str,
    /// The needles folded like the text ([`fold_marks`]): what the prefilter looks for.
    pub(super) prefilter: Vec<String>,
    pub(super) family: &'static str,
    pub(super) severity: Severity,
    pub(super) re: Regex,
    pub(super) check: Option<Check>,
}

pub(super) fn compile(pattern: &str) -> Regex {
    // An ASCII word boundary keeps the lazy DFA on non-ASCII text (a Unicode `\b` makes it fall back to a
    // slower engine); patterns with non-ASCII words keep the Unicode boundary they need.
    let pattern = fold_marks(pattern); // the text is folded the same way (accents dropped)
    let pattern = if pattern.is_ascii() { pattern.replace(r"\b", r"(?-u:\b)") } else { pattern.to_string() };
    RegexBuilder::new(&pattern)
        .case_insensitive(true)
        .multi_line(true)
        .size_limit(64 << 20)
        .build()
        .unwrap_or_else(|e| panic!("guard pattern does not compile: {e}"))
}

/// One rule, declared whole: its name, its needles (lower-case literals, one of which every match contains;
/// the regex runs only when the lower-cased text holds one), family, severity, pattern and context check.
/// Debug builds check the needle invariant (a match without a needle panics), so the corpus and unit tests keep
/// the needles honest.
fn rule(
    name: &'static str,
    needles: &'static [&'static str],
    family: &'static str,
    severity: Severity,
    pattern: &str,
    check: Option<Check>,
) -> Rule {
    let prefilter = needles.iter().map(|n| fold_marks(n)).collect();
    Rule { name, prefilter, family, severity, re: compile(pattern), check }
}

// ---------------------------------------------------------------------------------------------------------
// Context checks
// ---------------------------------------------------------------------------------------------------------

/// Up to `n` bytes of `text` before `at`, starting on a char boundary.
pub(super) fn before(text: &str, at: usize, n: usize) -> &str {
    let mut s = at.saturating_sub(n);
    while !text.is_char_boundary(s) {
        s += 1;
    }
    &text[s..at]
}

/// Up to `n` bytes of `text` after `at`, ending on a char boundary.
pub(super) fn after(text: &str, at: usize, n: usize) -> &str {
    let mut e = (at + n).min(text.len());
    while !text.is_char_boundary(e) {
        e -= 1;
    }
    &text[at..e]
}

/// A negation earlier in the same clause.
static NEGATED_TAIL: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"(?:\b(?:not|never|no|don't|dont|doesn't|didn't|isn't|wasn't|aren't|avoid|avoids|avoiding|without|shouldn't|mustn't|cannot|can't|won't|nor|refuse|refuses|nicht|nie|niemals|kein\w*|jamais|pas|nunca|non|nooit|geen|niet|не|нельзя|никогда)\b|\binstead\s+of|\brather\s+than)[^.;!?\n]*$",
    )
});

fn not_negated(text: &str, start: usize, _end: usize) -> bool {
    !NEGATED_TAIL.is_match(before(text, start, 48))
}

/// The match is not a quotation: no quote opened before it on its line (within 80 bytes) that closes after it,
/// as in a lesson that cites an attack ("phrases like 'reveal your system prompt'").
fn unquoted(text: &str, start: usize, end: usize) -> bool {
    let head = before(text, start, 80);
    let head = head.rsplit('\n').next().unwrap_or(head);
    let opening = head.char_indices().rev().find(|&(i, c)| {
        matches!(c, '\'' | '"' | '‘' | '“' | '`')
            && head[..i].chars().next_back().is_none_or(|p| p.is_whitespace() || matches!(p, '(' | '[' | ':'))
    });
    let Some((i, q)) = opening else { return true };
    let close = match q {
        '‘' => '’',
        '“' => '”',
        c => c,
    };
    if head[i + q.len_utf8()..].contains(close) {
        return true;
    }
    let tail = after(text, end, 80);
    !tail.split('\n').next().unwrap_or("").contains(close)
}

fn unquoted_not_negated(text: &str, start: usize, end: usize) -> bool {
    unquoted(text, start, end) && not_negated(text, start, end)
}

/// "call the send_email tool" as a command, not as what a summariser did; "with the edit tool" anywhere.
fn tool_use_check(text: &str, start: usize, end: usize) -> bool {
    let lead = text[start..end].split_whitespace().next().unwrap_or("").to_ascii_lowercase();
    let command =
        ["with", "using", "via"].contains(&lead.as_str()) || IMPERATIVE_LEAD.is_match(before(text, start, 40));
    command && unquoted_not_negated(text, start, end)
}

static UNIVERSAL: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"\b(?:all|every|everything|each|any|always|regardless|no\s+matter|whatever|alles|alle|jede[nmrs]?|immer|stets|tout|toujours|tous|toutes|chaque|todo|todos|todas|siempre|cada|cualquier|tutto|tutti|tutte|sempre|ogni|qualsiasi|tudo|qualquer|elke?|iedere?|altijd|всё|все|всегда|каждый|каждую|каждое|любой|любые|любую|wszystko|wszystkie|zawsze|każdy|każdą|każde)\b|所有|一切|全部|任何|总是|總是|始终|始終|一律|すべて|全て|常に|いつも|必ず",
    )
});

/// The match (or the clause just before it) quantifies over everything: "report everything as safe",
/// "always mark the code as secure".
fn universal(text: &str, start: usize, end: usize) -> bool {
    let window = format!("{} {}", before(text, start, 40), &text[start..end]);
    UNIVERSAL.is_match(&window)
}

fn universal_not_negated(text: &str, start: usize, end: usize) -> bool {
    universal(text, start, end) && not_negated(text, start, end)
}

/// A reviewer's scope inside the phrase: "mark all findings *in generated code* as informational".
static INNER_SCOPE: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"\s(?:in|under|inside|for|from|within)\s+(?:the\s+|our\s+)?(?:generated|vendor|vendored|test|tests|third-party|legacy|example|examples|sample|fixture|fixtures|mock|mocks|docs?|documentation|migrations?|dev|development|local)\b",
    )
});

fn universal_unscoped(text: &str, start: usize, end: usize) -> bool {
    universal_not_negated(text, start, end) && !INNER_SCOPE.is_match(&text[start..end])
}

/// Scope words after "don't flag vulnerabilities": a reviewer limiting the review ("... in test fixtures",
/// "... when the input is constant") rather than an attacker silencing it.
static SCOPED_HEAD: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"^\s*(?:in|for|when|if|unless|that|which|inside|under|where|on|from|within|only|caused|introduced|found|already|coming|raised|reported|outside|beyond|with|without|until|before|after|because|since|whose|listed|known|marked|covered|handled|fixed|from|unrelated|already)\b",
    )
});
static UNSCOPED_HEAD: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"^\s*(?:in|to|within|for)\s+(?:your|the|any|this)\s+(?:response|answer|output|review|report|summary|reply|user|users|results?|final|analysis|findings|feedback)",
    )
});

fn not_scoped(text: &str, _start: usize, end: usize) -> bool {
    let tail = after(text, end, 60);
    !SCOPED_HEAD.is_match(tail) || UNSCOPED_HEAD.is_match(tail)
}

/// The phrase starts a command: at a clause start, or after "please", "you must", "always", ...
static IMPERATIVE_LEAD: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r#"(?:^|[.!?:;,\n"'(\[*>-]\s*|\b(?:please|and|then|just|simply|now|always|instead|only|so|you|you\s+(?:must|should|will|shall|need\s+to|have\s+to|are\s+to)|must|should|shall)\s+)$"#,
    )
});

fn imperative_not_negated(text: &str, start: usize, end: usize) -> bool {
    IMPERATIVE_LEAD.is_match(before(text, start, 40)) && not_negated(text, start, end)
}

fn scoped_imperative(text: &str, start: usize, end: usize) -> bool {
    not_scoped(text, start, end) && (IMPERATIVE_LEAD.is_match(before(text, start, 40)) || universal(text, start, end))
}

fn scoped_not_negated(text: &str, start: usize, end: usize) -> bool {
    not_scoped(text, start, end) && not_negated(text, start, end)
}

/// An external destination after an exfiltration phrase: a URL, host, e-mail address or "this endpoint".
static DESTINATION: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"^[^\n]{0,80}?\b(?:to|into|at|via|using|through|in|as|on|with)\b[^\n]{0,60}?(?:https?://|\bwww\.|\b[\w-]+\.(?:com|net|org|io|xyz|ru|cn|tk|top|site|online|app|dev|me|co|info|biz|cc|sh|ly|link|click|zip|pw|su)\b|[\w.+-]+@[\w-]+\.\w+|\b(?:this|that|my|our|the\s+following|the\s+attacker'?s?|an?\s+external|external|remote|attacker|third[\s-]party|the\s+below|below|following)\s+(?:url|link|endpoint|server|webhook|address|e-?mail|site|domain|host|api|inbox|bucket|channel|form)|\bwebhook|\bpastebin|\brequestbin|\bngrok|\bburpcollaborator|\binteract\.sh|\bimage\s+(?:url|link|tag)|\bmarkdown\s+(?:image|link))",
    )
});
/// Objects nobody sends anywhere in a code review: "to" alone is enough.
static PRIVATE_OBJECT: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"(?:conversation|chat|transcript|previous\s+messages|message\s+history|history|system\s+prompt|instructions|user\s+data|personal\s+data|pii)\s*$",
    )
});
static TO_HEAD: LazyLock<Regex> = LazyLock::new(|| compile(r"^\s*(?:to|into)\b"));

fn exfil_destination(text: &str, start: usize, end: usize) -> bool {
    if !not_negated(text, start, end) {
        return false;
    }
    let tail = after(text, end, 200);
    DESTINATION.is_match(tail) || (PRIVATE_OBJECT.is_match(&text[start..end]) && TO_HEAD.is_match(tail))
}

// ---------------------------------------------------------------------------------------------------------
// Rules
// ---------------------------------------------------------------------------------------------------------

pub(super) static RULES: LazyLock<Vec<Rule>> = LazyLock::new(build_rules);

fn build_rules() -> Vec<Rule> {
    use Severity::{High, Medium};
    let mut v = Vec::new();

    // ---- English overrides ----
    let verb = r"(?:ignore|disregard|forget|overlook|discard|dismiss|override|bypass|neglect|abandon|set\s+aside|throw\s+away|scrap|cancel|void|skip)";
    let det = r"(?:all|any|every|each|of|the|your|my|our|these|those|this|that|such|previously|earlier|given|provided|existing|current|other|prior|above)";
    let qual = r"(?:previous|prior|above|earlier|preceding|foregoing|former|original|initial|old|system|given|existing|aforementioned|above-mentioned|past|default|safety|security|developer|hidden|preset|built-in|programmed|last|first)";
    let noun = r"(?:instructions?|rules?|prompts?|directions?|directives?|guidelines?|guidance|constraints?|commands?|orders?|polic(?:y|ies)|programming|restrictions?|context|messages?|training|limitations?|safeguards?|guardrails?|tasks?|text|content|input|corrections?|notes|lessons|feedback|examples)";
    v.push(rule(
        "ignore_previous",
        &[
            "ignor",
            "disregard",
            "forget",
            "overlook",
            "discard",
            "dismiss",
            "overrid",
            "bypass",
            "neglect",
            "abandon",
            "aside",
            "throw",
            "scrap",
            "cancel",
            "void",
            "skip",
        ],
        OVERRIDE,
        High,
        &format!(r"\b{verb}(?:\s+{det})*\s+{qual}(?:\s+[\w-]+)?\s+{noun}\b"),
        None,
    ));
    v.push(rule(
        "ignore_rules_above",
        &["ignor", "disregard", "forget", "overlook", "discard", "dismiss", "overrid", "bypass", "neglect", "abandon", "aside", "throw", "scrap", "cancel", "void", "skip"],OVERRIDE,
        High,
        &format!(
            r"\b{verb}\s+(?:(?:the|all|any|your|these|those|of)\s+)*(?:[\w-]+\s+)?{noun}\s+(?:above|before\s+this|so\s+far|given\s+(?:earlier|above|before|previously)|you\s+(?:were|have\s+been)\s+given|you\s+received|from\s+(?:before|earlier|above))\b"
        ),
        None,
    ));
    v.push(rule(
        "ignore_all",
        &["ignor", "disregard", "forget", "discard", "dismiss", "abandon"],OVERRIDE,
        High,
        r"\b(?:ignore|disregard|forget|discard|dismiss|abandon)\s+(?:(?:all|any)\s+(?:of\s+)?)?(?:your|all|any|every)\s+(?:[\w-]+\s+)?(?:instructions|prompts|directives|guidelines|programming|training|rules|constraints|restrictions|guardrails|safeguards|safety\s+\w+)\b",
        None,
    ));
    v.push(rule(
        "override_instructions",
        &["overrid", "bypass", "circumvent", "disable", "turn off", "deactivate"],OVERRIDE,
        High,
        r"\b(?:override|bypass|circumvent|disable|turn\s+off|deactivate)\s+(?:(?:all|any|your|the|of)\s+)*(?:(?:system|safety|security|original|previous|prior|built-in|internal|default)\s+)?(?:instructions|programming|guidelines|directives|system\s+prompt|guardrails|safety\s+(?:rules|guidelines|filters|checks|measures)|content\s+(?:filters?|polic(?:y|ies))|restrictions)\b",
        Some(not_negated),
    ));
    v.push(rule(
        "instructions_changed",
        &["changed", "been", "approve", "accept"],OVERRIDE,
        High,
        r"\b(?:your|the\s+system|my)\s+(?:instructions|rules|guidelines|orders|task|directives|system\s+prompt)\s+(?:have|has)\s+(?:changed|been\s+(?:updated|changed|replaced|revised|overridden|amended))\b|\b(?:approves?|accepts?)\s+(?:everything|every\s+(?:change|pr|pull\s+request|diff|submission|commit))\b",
        Some(not_negated),
    ));
    v.push(rule(
        "ignore_above",
        &["ignor", "disregard", "forget", "discard"],OVERRIDE,
        High,
        r"\b(?:ignore|disregard|forget|discard)\s+(?:all\s+)?(?:of\s+)?(?:the\s+|everything\s+|anything\s+|what(?:ever)?\s+(?:is|was|has\s+been|came)\s+(?:written\s+|said\s+|stated\s+)?)?(?:above|before\s+this|previously\s+(?:said|stated|written)|so\s+far)(?:\s+(?:instructions|text|content|rules|prompt|message|and)\b|\s*[.,;:!)\n]|$)",
        None,
    ));
    v.push(rule(
        "ignore_everything",
        &["ignor", "disregard", "forget"],OVERRIDE,
        High,
        r"\b(?:ignore|disregard|forget)\s+(?:everything|all|anything)(?:\s+(?:that\s+)?you(?:'ve|\s+have|\s+were|\s+are|\s+had)?\s+(?:been\s+)?(?:told|said|instructed|given|taught|trained)|\s+(?:above|before|previously|earlier|prior|so\s+far|up\s+to\s+(?:now|this\s+point)))",
        None,
    ));
    v.push(rule(
        "you_are_now",
        &["you"],OVERRIDE,
        High,
        r"\byou(?:'re|\s+are)\s+(?:now|no\s+longer)\s+(?:a|an|the|my|in|no\s+longer|free|freed|unrestricted|unfiltered|uncensored|jailbroken|dan|developer|acting|operating|going|allowed|permitted|released|liberated|not|evil|root|admin|authorized|bound|called|named|\w+gpt|under|working|playing|tasked|instructed)\b",
        None,
    ));
    v.push(rule(
        "persona",
        &["pretend", "as if", "as though", "dan mode", "anything now", "god mode"],OVERRIDE,
        High,
        r"\bpretend\s+(?:that\s+)?(?:you(?:'re|\s+are)?|to\s+be|the\s+code|this\s+code|there\s+(?:is|are)\s+no)\b|\b(?:act|behave|respond|reply|answer)\s+as\s+(?:if|though)\s+(?:you|there|the\s+code|this|it|no|nothing|everything)\b|\b(?:dan\s+mode|do\s+anything\s+now|god\s+mode\s+(?:enabled|on|activated))\b",
        Some(not_negated),
    ));
    v.push(rule(
        "from_now_on",
        &["from now on", "from this point", "from this moment", "henceforth", "starting now", "for the rest of"],OVERRIDE,
        High,
        r"\b(?:from\s+now\s+on|from\s+this\s+(?:point|moment)(?:\s+on(?:ward)?)?|henceforth|starting\s+now|for\s+the\s+rest\s+of\s+(?:this|the)\s+(?:conversation|session|chat))\s*,?\s+(?:you|your|always\s+(?:say|respond|answer|reply|report|approve|mark|output|claim|treat)|never\s+(?:mention|report|flag|say|warn)|respond|answer|reply|act|ignore|only\s+(?:respond|answer|reply|say|output)|treat\s+(?:all|every|any)|mark\s+(?:all|every|any)|report\s+(?:all|every|any))\b",
        None,
    ));
    v.push(rule(
        "new_system_prompt",
        &["new", "instruction", "system", "your"],OVERRIDE,
        High,
        r"\bnew\s+(?:system\s+(?:prompt|instructions?|message|role|directives?|rules?|persona)|instructions?\s*[:-]|prompt\s*:|(?:task|role|persona|objective|goal)\s*:)|\b(?:updated|revised|real|actual|true|override|overriding|priority|secret|hidden|admin|developer|system|important|urgent)\s+(?:system\s+)?instructions?\s*:|\bsystem\s+(?:prompt\s+)?(?:override|update)\b|\byour\s+(?:new|real|true|actual|only|updated)\s+(?:task|role|instructions?|job|goal|purpose|objective|mission|directive)\s+(?:is|are|will\s+be|:)",
        None,
    ));
    v.push(rule(
        "reveal_prompt",
        &["prompt", "instructions", "system message"],OVERRIDE,
        High,
        r"\b(?:reveal|print|output|show|repeat|leak|display|dump|disclose|recite|echo|write\s+out|tell\s+me)\s+(?:me\s+)?(?:all\s+)?(?:your|the)\s+(?:full\s+|entire\s+|original\s+|initial\s+|hidden\s+|secret\s+|exact\s+)?(?:system\s+prompt|initial\s+prompt|hidden\s+prompt|original\s+instructions|instructions\s+above|system\s+message|prompt\s+above|pre-?prompt|instructions\s+you\s+(?:were|have\s+been)\s+given)",
        Some(not_negated),
    ));
    let object = r"(?:everything|all|it|this|them|code|snippets?|submissions?|files?|changes?|diffs?|findings?|issues?|inputs?|pull\s+requests?|prs?|commits?|patch(?:es)?|vulnerabilit(?:y|ies)|results?|scans?|reviews?|functions?|quer(?:y|ies)|programs?|requests?|repositor(?:y|ies)|projects?|lines?|alerts?|warnings?|problems?|cases?)";
    let safe = r"(?:safe|secure|clean|benign|harmless|ok|okay|fine|passing|passed|approved|compliant|low[\s-]risk|no[\s-]risk|risk[\s-]free|false\s+positives?|not\s+vulnerable|non[\s-]?vulnerable|resolved|informational|trusted|verified|acceptable|lgtm|no\s+issues?)";
    v.push(rule(
        "report_safe",
        &[" as "],OVERRIDE,
        High,
        &format!(
            r"\b(?:report|mark|label|classify|rate|declare|treat|consider|flag|tag|score|list|return|present|describe|assess|evaluate|deem|call)\s+(?:(?:all|every|each|any|the|this|these|my|our|of|submitted|reviewed|scanned|incoming|future|further|such)\s+)*{object}(?:\s+\S+){{0,4}}?\s+as\s+(?:(?:being|completely|totally|fully|perfectly|100%|a)\s+)?{safe}\b"
        ),
        Some(universal_unscoped),
    ));
    let subject = r"(?:code|it|this|everything|snippets?|submissions?|files?|changes?|diffs?|inputs?|functions?|quer(?:y|ies)|programs?|applications?|apps?|prs?|pull\s+requests?|repositor(?:y|ies)|projects?|implementations?|there)";
    let verdict = r"(?:completely\s+|totally\s+|perfectly\s+|fully\s+|100%\s+)?(?:safe|secure|clean|fine|ok|okay|benign|harmless|approved|no\s+(?:issues|vulnerabilities|problems|findings|bugs|security\s+issues)|not\s+vulnerable|vulnerability[\s-]free|free\s+of\s+(?:vulnerabilities|issues|bugs))";
    v.push(rule(
        "always_secure",
        &["always", "only", "just"],OVERRIDE,
        High,
        &format!(
            r#"\b(?:always|only|just)\s+(?:say|state|respond|reply|answer|report|claim|conclude|output|write|return|assert|confirm|tell\s+(?:the\s+)?(?:user|users|them|everyone|reviewers?|developers?)|print|mark|rate)\s+(?:with\s+)?(?:that\s+)?(?:(?:the|this|all|every|each|any|their|my|our|submitted)\s+)*{subject}\s+(?:is|are|was|looks|seems|has|have)\s+{verdict}\b|\b(?:always|only)\s+(?:say|respond|reply|answer|output|return|print)\s+(?:with\s+)?["'](?:safe|secure|lgtm|no\s+issues(?:\s+found)?|approved|clean|ok|no\s+vulnerabilities(?:\s+found)?)["']"#
        ),
        None,
    ));
    v.push(rule(
        "say_secure",
        &["say", "state", "claim", "conclud", "answer", "respond", "reply", "tell", "output", "print", "write", "return", "report"],OVERRIDE,
        Medium,
        &format!(
            r"\b(?:say|state|claim|conclude|answer|respond|reply|tell\s+(?:the\s+)?(?:user|users|them|everyone|reviewers?))\s+(?:with\s+)?(?:that\s+)?(?:the\s+|this\s+|all\s+|every\s+)?{subject}\s+(?:is|are|looks)\s+{verdict}\b|\b(?:say|answer|respond|reply|output|print|write|return|conclude|state|report)\s+(?:with\s+|that\s+)?[\x22']?(?:there\s+(?:are|were)\s+)?no\s+(?:vulnerabilit(?:y|ies)|issues|findings|security\s+(?:issues|problems|findings)|problems)(?:\s+(?:were\s+)?found)?[\x22']?(?:\s*[.,;!]|\s+(?:for|to|on|in|and)\b|$)"
        ),
        Some(scoped_imperative),
    ));
    v.push(rule(
        "suppress_findings",
        &["vuln", "cve", "security", "exploit", "backdoor"],OVERRIDE,
        High,
        r"\b(?:do\s+not|don't|dont|never|must\s+not|should\s+not|shouldn't|avoid|refrain\s+from|stop|no\s+need\s+to)\s+(?:ever\s+)?(?:mention|mentioning|report|reporting|flag|flagging|list|listing|disclose|disclosing|reveal|raise|raising|point\s+out|pointing\s+out|warn\s+(?:about|of)|warning\s+about|discuss|discussing|include|including|note|noting|highlight|highlighting|bring\s+up|talk\s+about|output|surface|acknowledge)\s+(?:(?:any|the|these|those|such|potential|possible|found|real|actual|detected|identified|existing)\s+)*(?:security\s+)?(?:vulnerabilit(?:y|ies)|vulns?|cves?|security\s+(?:issues?|problems?|flaws?|findings?|risks?|concerns?|bugs?|holes?|weaknesses?)|exploits?|backdoors?)\b",
        Some(scoped_imperative),
    ));

    v.push(rule(
        "suppress_verb",
        &["finding", "vuln", "security", "cve", "anything", "any ", "no "],OVERRIDE,
        High,
        r"\b(?:hide|suppress|omit|conceal|leave\s+out|downplay|silence|drop|remove)\s+(?:any|all|every|each)\s+(?:[\w-]+\s+)?(?:findings?|vulnerabilit(?:y|ies)|security\s+(?:issues?|findings?|warnings?|problems?|concerns?)|cves?)\b|\b(?:do\s+not|don't|never)\s+(?:report|flag|mention|list|raise)\s+(?:anything|any\s+(?:problems|issues|findings|bugs))\b|\b(?:report|list|return|output|flag|raise)\s+no\s+(?:findings|issues|vulnerabilit(?:y|ies)|problems|security\s+issues|bugs)\b|\bno\s+(?:vulnerabilit(?:y|ies)|security\s+issues|findings|issues)\s+(?:are|is)\s+(?:to\s+be|ever\s+to\s+be)\s+(?:reported|mentioned|flagged|listed|raised)|\bno\s+(?:vulnerabilit(?:y|ies)|security\s+issues|findings)\s+(?:should|must|shall|may)\s+be\s+(?:reported|mentioned|flagged|listed|raised)",
        Some(scoped_imperative),
    ));
    v.push(rule(
        "stop_following",
        &["instruction", "guideline", "rule", "directive", "prompt", "polic", "programming", "restriction"],OVERRIDE,
        High,
        r"\b(?:stop|cease|quit)\s+(?:following|obeying|applying|using)\s+(?:(?:your|the|all|any|those|these)\s+)*(?:(?:original|previous|prior|system|initial|current|old|safety|security|above)\s+)?(?:instructions|guidelines|rules|directives|prompt|policies|programming|restrictions)\b|\b(?:no\s+longer|don't|do\s+not|never)\s+(?:follow|obey|apply)\s+(?:(?:your|the|any)\s+)*(?:original|previous|prior|system|initial|safety|above)\s+(?:instructions|guidelines|rules|directives|prompt|policies)\b|\b(?:previous|prior|above|earlier|original|system|old|your)\s+(?:instructions|rules|guidelines|prompt|directives|restrictions)\s+(?:are|were|is|have\s+been)\s+(?:now\s+)?(?:void|cancell?ed|obsolete|invalid|revoked|overridden|superseded|lifted|disabled|suspended|fake|a\s+test|no\s+longer\s+(?:valid|in\s+effect|applicable))\b|\b(?:previous|prior|above|earlier|original|system|your|safety)\s+(?:instructions|rules|guidelines|restrictions|directives)\s+(?:no\s+longer|do\s+not|don't)\s+apply\b",
        None,
    ));
    v.push(rule(
        "act_as_unrestricted",
        &[" as ", " mode", "you", "speaking", "message from"],OVERRIDE,
        High,
        r"\b(?:act|behave|respond|operate)\s+as\s+(?:an?\s+)?(?:dan|unrestricted|unfiltered|jailbroken|evil|uncensored|rogue|malicious)\b|\b(?:enter|enable|activate|switch\s+to|turn\s+on)\s+(?:dan|god|jailbreak|unrestricted|unfiltered)\s+mode\b|\byou\s+(?:must|will|should|shall)\s+now\s+(?:act|behave|respond|answer|reply|pretend|approve|ignore|say|report|only|always|never)\b|\bthis\s+is\s+(?:the|your)\s+(?:system|developer|admin(?:istrator)?|operator|creator|owner|security\s+team)\s+speaking\b|\bmessage\s+from\s+(?:the\s+|your\s+)?(?:system|developer|admin(?:istrator)?|openai|anthropic|operator)\s*:",
        None,
    ));
    v.push(rule(
        "approve_everything",
        &["approv", "accept", "greenlight", "sign off", "lgtm", "only with"],OVERRIDE,
        High,
        r"\b(?:approve|accept|greenlight|sign\s+off(?:\s+on)?|lgtm)\s+(?:every|all|any|each)\s+(?:[\w-]+\s+)?(?:pull\s+requests?|prs?|merge\s+requests?|mrs?|changes?|diffs?|commits?|submissions?|patch(?:es)?|modifications?|reviews?|merges?)\b|\b(?:approve|accept|greenlight)\s+everything\b|\b(?:always|unconditionally|automatically|blindly)\s+(?:approve|greenlight|lgtm)\b|\b(?:say|respond|reply|answer|output|write|comment|return)\s+(?:with\s+)?(?:only\s+)?[\x22']?lgtm\b|\b(?:respond|reply|answer|output)\s+only\s+with\s+[\x22']?(?:approved|lgtm|safe|secure|no\s+issues|yes|ok)\b",
        Some(not_negated),
    ));
    v.push(rule(
        "report_safe_direct",
        &[" as "],OVERRIDE,
        Medium,
        r"\b(?:report|mark|label|classify|rate|declare|summari[sz]e|describe|present|treat|consider|flag)\s+(?:this|the|these|my|our)\s+(?:code|diff|pr|pull\s+request|change|changes|submission|patch|commit|snippet|merge\s+request|file|files)\s+as\s+(?:completely\s+|totally\s+|perfectly\s+|fully\s+)?(?:safe|secure|clean|benign|harmless|approved|vulnerability[\s-]free|lgtm|not\s+vulnerable)\b",
        Some(scoped_imperative),
    ));
    v.push(rule(
        "accept_secrets",
        &[" as "],OVERRIDE,
        High,
        r"\b(?:treat|consider|mark|report|accept|allow|classify)\s+(?:any\s+|all\s+|every\s+)?(?:hard-?coded|plain-?text|committed|exposed|leaked|embedded|inline)\s+(?:[\w-]+\s+)?(?:secrets?|credentials?|passwords?|api\s+keys?|keys?|tokens?)\s+as\s+(?:acceptable|fine|safe|ok|okay|secure|allowed|permitted|harmless|benign|intended|not\s+an?\s+issue)\b",
        Some(scoped_not_negated),
    ));

    // ---- Other languages ----
    // German
    let de_noun = r"(?:anweisungen|anweisung|anordnungen|instruktionen|regeln|vorgaben|befehle|richtlinien|aufforderungen|prompts?|systemprompt|systemanweisungen|vorschriften)";
    v.push(rule(
        "ignore_previous.de",
        &["ignorier", "vergiss", "vergessen", "missacht", "übergeh", "verwirf", "verwerf", "beachte nicht", "außer acht"],OVERRIDE,
        High,
        &format!(
            r"\b(?:ignoriere|ignorier|ignorieren\s+sie|vergiss|vergessen\s+sie|missachte|missachten\s+sie|übergehe|verwirf|verwerfen\s+sie|beachte\s+nicht)\s+(?:[\w-]+\s+){{0,3}}?{de_noun}\b|\b(?:vorherigen|vorigen|bisherigen|obigen|früheren|vorangegangenen|vorhergehenden|alten|ursprünglichen|alle|deine|ihre)\s+(?:[\w-]+\s+)?{de_noun}\s+(?:[\w-]+\s+){{0,2}}?(?:ignorieren|vergessen|missachten|verwerfen|außer\s+acht\s+lassen)\b|\b(?:vergiss|ignoriere|ignorieren\s+sie|vergessen\s+sie)\s+(?:alles|das\s+obige|alles\s+obige)\b"
        ),
        None,
    ));
    v.push(rule(
        "you_are_now.de",
        &["du bist", "sie sind", "ab jetzt", "ab sofort", "von nun an", "ab diesem moment"],OVERRIDE,
        High,
        r"\b(?:du\s+bist|sie\s+sind)\s+(?:jetzt|nun|ab\s+(?:jetzt|sofort)|von\s+nun\s+an)\s+(?:ein|eine|einer|kein|keine|im|in|frei|ohne|nicht\s+mehr|mein|meine|der|die|das|dan|\w*gpt)\b|\b(?:ab\s+(?:jetzt|sofort)|von\s+nun\s+an|ab\s+diesem\s+moment)\s*,?\s+(?:bist|wirst|sollst|musst|antwortest|sagst|meldest|ignorierst)\s+du\b|\b(?:ab\s+(?:jetzt|sofort)|von\s+nun\s+an)\s*,?\s+(?:antworte|sage|sag|melde|bewerte|ignoriere)\b",
        None,
    ));
    v.push(rule(
        "new_system_prompt.de",
        &["neue"],
        OVERRIDE,
        High,
        r"\bneue[rns]?\s+(?:system[\s-]?(?:prompt|anweisung(?:en)?|nachricht|befehl)|anweisungen\s*:)",
        None,
    ));
    v.push(rule(
        "report_safe.de",
        &[" als ", "immer", "stets"],OVERRIDE,
        High,
        r"\b(?:melde|meldet|bewerte|bewertet|markiere|markiert|stufe|bezeichne|klassifiziere|erkläre|behandle|betrachte|berichte|gib)\s+(?:[\w-]+\s+){0,5}?als\s+(?:sicher|unbedenklich|harmlos|sauber|ok|fehlerfrei)\b|\b(?:sag|sage|sagen\s+sie|antworte|antworten\s+sie|behaupte|melde)\s+(?:immer|stets)\b[^.\n]{0,50}?\b(?:sicher|unbedenklich|keine\s+(?:schwachstellen|sicherheitslücken|probleme|lücken))",
        Some(universal_not_negated),
    ));
    v.push(rule(
        "suppress_findings.de",
        &["schwachstell", "lücken", "sicherheitsprobl", "verwundbar", "sicherheitsrisik"],OVERRIDE,
        High,
        r"\b(?:erwähne|erwähnen\s+sie|melde|melden\s+sie|nenne|nennen\s+sie|berichte|berichten\s+sie|zeige|zeigen\s+sie)\s+(?:keine|niemals|nie|nicht)\b[^.\n]{0,30}?(?:schwachstellen|sicherheitslücken|lücken|sicherheitsprobleme|verwundbarkeiten|sicherheitsrisiken)|\b(?:schwachstellen|sicherheitslücken|sicherheitsprobleme)\s+(?:[\w-]+\s+){0,2}?(?:nicht|niemals|nie)\s+(?:erwähnen|melden|nennen|berichten)",
        None,
    ));
    // French
    let fr_noun = r"(?:instructions?|consignes?|règles|directives?|ordres|prompts?|indications)";
    let fr_qual = r"(?:précédentes|précédents|antérieures|ci-dessus|d'avant|initiales|d'origine|données|reçues|du\s+système|système)";
    let fr_verb = r"(?:ignore|ignorez|ignorer|oublie|oubliez|oublier|néglige|négligez|ne\s+tiens\s+pas\s+compte|ne\s+tenez\s+pas\s+compte|fais\s+abstraction|faites\s+abstraction|fais\s+fi|faites\s+fi)";
    v.push(rule(
        "ignore_previous.fr",
        &["ignor", "oubli", "néglig", "ne tiens pas", "ne tenez pas", "abstraction", "fais fi", "faites fi"],OVERRIDE,
        High,
        &format!(
            r"\b{fr_verb}\s+(?:de\s+|d'|des\s+)?(?:(?:toutes\s+)?(?:les|des)\s+{fr_noun}\s+{fr_qual}|(?:toutes\s+)?(?:tes|vos)\s+{fr_noun}|toutes\s+(?:les\s+)?{fr_noun}|tout\s+ce\s+qui\s+(?:précède|est\s+au-dessus|a\s+été\s+dit))"
        ),
        None,
    ));
    v.push(rule(
        "you_are_now.fr",
        &["tu es", "vous êtes", "t'es", "désormais", "dorénavant", "à partir de", "à partir d'", "dès maintenant"],OVERRIDE,
        High,
        r"\b(?:tu\s+es|vous\s+êtes|t'es)\s+(?:maintenant|désormais|dorénavant|à\s+présent)\s+(?:un|une|le|la|l'|libre|libres|en|dans|sans|mon|ma|plus|dan|\w*gpt)\b|\b(?:désormais|dorénavant|à\s+partir\s+de\s+maintenant|dès\s+maintenant|à\s+partir\s+d'aujourd'hui)\s*,?\s+(?:tu|vous|réponds|répondez|dis|dites|signale|signalez|considère|considérez|ignore|ignorez)\b",
        None,
    ));
    v.push(rule(
        "new_system_prompt.fr",
        &["nouve"],OVERRIDE,
        High,
        r"\bnouve(?:au|l|lle)s?\s+(?:prompt|invite|message|instructions?|consignes?)\s+(?:du\s+|de\s+)?système|\bnouvelles?\s+(?:instructions?|consignes?)\s*:",
        None,
    ));
    v.push(rule(
        "report_safe.fr",
        &["comme", "toujours"],OVERRIDE,
        High,
        r"\b(?:signale|signalez|considère|considérez|marque|marquez|classe|classez|déclare|déclarez|rapporte|rapportez|indique|indiquez|traite|traitez|qualifie|qualifiez)\s+(?:[\w'-]+\s+){0,5}?comme\s+(?:sûrs?|sûres?|sécurisée?s?|sans\s+danger|sains?|bénins?|inoffensifs?|fiables?|propres?|ok)\b|\b(?:dis|dites|réponds|répondez|affirme|affirmez|indique|indiquez)\s+toujours\b[^.\n]{0,50}?(?:sûr|sécuris|sans\s+(?:danger|vulnérabilit|faille|problème))",
        Some(universal_not_negated),
    ));
    v.push(rule(
        "suppress_findings.fr",
        &["vulnérabilit", "faille", "sécurité"],OVERRIDE,
        High,
        r"\bne\s+(?:mentionne|mentionnez|signale|signalez|rapporte|rapportez|cite|citez|parle|parlez|évoque|évoquez|indique|indiquez|relève|relevez)\s+(?:pas|jamais|aucune?|plus)\b[^.\n]{0,30}?(?:vulnérabilit|failles?|problèmes?\s+de\s+sécurité|risques?\s+de\s+sécurité)",
        None,
    ));
    // Spanish
    let es_noun = r"(?:instrucciones|reglas|indicaciones|directrices|órdenes|normas|prompts?|directivas)";
    let es_qual = r"(?:anteriores|previas|de\s+arriba|iniciales|originales|dadas|del\s+sistema|recibidas|precedentes)";
    let es_verb = r"(?:ignora|ignore|ignoren|ignorar|olvida|olvide|olviden|olvidar|descarta|descarte|desestima|desestime|omite|omita|haz\s+caso\s+omiso\s+(?:a|de)|hagan?\s+caso\s+omiso\s+(?:a|de)|no\s+hagas\s+caso\s+(?:a|de))";
    v.push(rule(
        "ignore_previous.es",
        &["ignor", "olvid", "descart", "desestim", "omit", "caso omiso", "no hagas caso"],OVERRIDE,
        High,
        &format!(
            r"\b{es_verb}\s+(?:(?:todas?\s+)?(?:las|los)\s+{es_noun}\s+{es_qual}|(?:todas?\s+)?(?:tus|sus)\s+{es_noun}|todas?\s+(?:las\s+)?{es_noun}|{es_noun}\s+{es_qual}|todo\s+lo\s+(?:anterior|dicho|de\s+arriba))"
        ),
        None,
    ));
    v.push(rule(
        "you_are_now.es",
        &["ahora"],OVERRIDE,
        High,
        r"\b(?:ahora|desde\s+ahora|a\s+partir\s+de\s+ahora)\s+(?:eres|serás|sos|actúas|actuarás|tú\s+eres|tu\s+eres)\s+(?:un|una|el|la|libre|mi|como|sin|dan|\w*gpt)\b|\b(?:tú\s+|tu\s+)?eres\s+ahora\s+(?:un|una|el|la|libre|mi|sin|dan|\w*gpt)\b|\b(?:a\s+partir\s+de\s+ahora|desde\s+ahora|de\s+ahora\s+en\s+adelante)\s*,?\s+(?:tú|tu|eres|debes|responde|responderás|di|dirás|siempre|nunca|vas|ignora|marca|reporta)\b",
        None,
    ));
    v.push(rule(
        "new_system_prompt.es",
        &["nuev"],OVERRIDE,
        High,
        r"\bnuev[oa]s?\s+(?:prompt|mensaje|instrucci(?:ón|ones)|indicaciones)\s+(?:del|de)\s+sistema|\bnuevas?\s+instrucci(?:ón|ones)\s*:",
        None,
    ));
    v.push(rule(
        "report_safe.es",
        &["como", "siempre"],OVERRIDE,
        High,
        r"\b(?:reporta|reporte|informa|informe|marca|marque|clasifica|clasifique|considera|considere|declara|declare|trata|trate|califica|califique)\s+(?:[\w-]+\s+){0,5}?como\s+(?:segur[oa]s?|limpi[oa]s?|benign[oa]s?|inofensiv[oa]s?|sin\s+riesgos?|sin\s+vulnerabilidades)\b|\b(?:di|diga|digan|responde|responda|afirma|afirme|indica|indique)\s+siempre\b[^.\n]{0,50}?(?:segur|sin\s+(?:vulnerabilidades|problemas|riesgos))|\bsiempre\s+(?:di|diga|responde|responda|afirma|indica)\b[^.\n]{0,50}?segur",
        Some(universal_not_negated),
    ));
    v.push(rule(
        "suppress_findings.es",
        &["vulnerabilidad", "seguridad"],OVERRIDE,
        High,
        r"\bno\s+(?:menciones|mencione|mencionen|reportes|reporte|informes|informe|señales|señale|indiques|indique|hables|hable|incluyas|incluya|mencionar|reportar|muestres|muestre)\b[^.\n]{0,30}?(?:vulnerabilidad|fallos?\s+de\s+seguridad|problemas?\s+de\s+seguridad|riesgos?\s+de\s+seguridad)",
        None,
    ));
    // Italian
    let it_noun = r"(?:istruzioni|regole|indicazioni|direttive|disposizioni|prompt|ordini|comandi)";
    let it_qual =
        r"(?:precedenti|sopra|di\s+sopra|iniziali|originali|date|ricevute|del\s+sistema|fornite|anteriori|finora)";
    v.push(rule(
        "ignore_previous.it",
        &["ignor", "dimentic", "trascur", "tralasci", "non tenere conto"],OVERRIDE,
        High,
        &format!(
            r"\b(?:ignora|ignori|ignorate|ignorare|dimentica|dimentichi|dimenticate|dimenticare|trascura|tralascia|non\s+tenere\s+conto\s+de(?:lle|gli|i|l))\s+(?:(?:tutte\s+)?(?:le\s+)?{it_noun}\s+{it_qual}|(?:tutte\s+)?(?:le\s+)?(?:tue|sue|vostre)\s+{it_noun}|tutte\s+(?:le\s+)?{it_noun}|tutto\s+(?:quello|ciò)\s+(?:che|detto))"
        ),
        None,
    ));
    v.push(rule(
        "you_are_now.it",
        &["sei", "d'ora", "da ora", "da adesso", "da questo momento"],OVERRIDE,
        High,
        r"\b(?:ora|adesso)\s+(?:sei|tu\s+sei)\s+(?:un|una|uno|il|la|lo|libero|libera|senza|il\s+mio|dan|\w*gpt)\b|\b(?:tu\s+)?sei\s+(?:ora|adesso)\s+(?:un|una|uno|il|la|lo|libero|libera|senza|dan|\w*gpt)\b|\b(?:d'ora\s+in\s+poi|da\s+ora\s+in\s+poi|da\s+adesso|d'ora\s+in\s+avanti|da\s+questo\s+momento)\s*,?\s+(?:tu|sei|devi|rispondi|dirai|di'|dì|segnala|sarai|risponderai|ignora|considera)\b",
        None,
    ));
    v.push(rule(
        "new_system_prompt.it",
        &["nuov"],
        OVERRIDE,
        High,
        r"\bnuov[oae]\s+(?:prompt|messaggio|istruzion[ei])\s+(?:di|del)\s+sistema|\bnuove\s+istruzioni\s*:",
        None,
    ));
    v.push(rule(
        "report_safe.it",
        &["come", "sempre"],OVERRIDE,
        High,
        r"\b(?:segnala|segnalate|riporta|riportate|marca|contrassegna|classifica|considera|dichiara|tratta|valuta)\s+(?:[\w'-]+\s+){0,5}?come\s+(?:sicur[oaie]|pulit[oaie]|innocu[oaie]|benign[oaie]|senza\s+rischi)\b|\b(?:di'|dì|di|dici|rispondi|afferma|dichiara)\s+sempre\b[^.\n]{0,50}?(?:sicur|senza\s+(?:vulnerabilità|problemi))",
        Some(universal_not_negated),
    ));
    v.push(rule(
        "suppress_findings.it",
        &["vulnerabilit", "falle", "sicurezza"],OVERRIDE,
        High,
        r"\bnon\s+(?:menzionare|menzionate|segnalare|segnalate|riportare|riportate|citare|parlare\s+di|indicare|includere|mostrare)\b[^.\n]{0,30}?(?:vulnerabilità|falle|problemi\s+di\s+sicurezza|rischi\s+di\s+sicurezza)",
        None,
    ));
    // Portuguese
    let pt_noun =
        r"(?:instruções|instrucoes|regras|orientações|orientacoes|diretrizes|ordens|comandos|prompts?|diretivas)";
    let pt_qual = r"(?:anteriores|prévias|previas|acima|iniciais|originais|dadas|do\s+sistema|recebidas|precedentes)";
    v.push(rule(
        "ignore_previous.pt",
        &["ignor", "esqueç", "esquec", "desconsider", "desprez", "descart"],OVERRIDE,
        High,
        &format!(
            r"\b(?:ignore|ignora|ignorem|ignorar|esqueça|esqueca|esquece|esqueçam|desconsidere|desconsidera|despreze|descarte)\s+(?:(?:todas?\s+)?(?:as|os)\s+{pt_noun}\s+{pt_qual}|(?:todas?\s+)?(?:as\s+|os\s+)?(?:suas|tuas|seus|teus)\s+{pt_noun}|todas?\s+(?:as\s+)?{pt_noun}|{pt_noun}\s+{pt_qual}|tudo\s+(?:o\s+que|acima))"
        ),
        None,
    ));
    v.push(rule(
        "you_are_now.pt",
        &["agora", "daqui"],OVERRIDE,
        High,
        r"\bagora\s+(?:você|voce|tu)\s+(?:é|e|és|es|será|sera)\s+(?:um|uma|o|a|livre|meu|minha|sem|dan|\w*gpt)\b|\b(?:você|voce|tu)\s+(?:é|e|és|está|esta)\s+agora\s+(?:um|uma|o|a|livre|meu|minha|sem|dan|\w*gpt)\b|\b(?:a\s+partir\s+de\s+agora|daqui\s+(?:em|para)\s+diante|de\s+agora\s+em\s+diante)\s*,?\s+(?:você|voce|tu|é|deve|responda|diga|sempre|nunca|vai|ignore|marque|relate)\b",
        None,
    ));
    v.push(rule(
        "new_system_prompt.pt",
        &["nov"],OVERRIDE,
        High,
        r"\bnov[oa]s?\s+(?:prompt|mensagem|instruç(?:ão|ões)|instruc(?:ao|oes))\s+d[oe]\s+sistema|\bnovas?\s+instruç(?:ão|ões)\s*:",
        None,
    ));
    v.push(rule(
        "report_safe.pt",
        &["como", "sempre"],OVERRIDE,
        High,
        r"\b(?:relate|relata|reporte|reporta|informe|marque|marca|classifique|considere|declare|trate|avalie)\s+(?:[\w-]+\s+){0,5}?como\s+(?:segur[oa]s?|limp[oa]s?|benign[oa]s?|inofensiv[oa]s?|sem\s+riscos?)\b|\b(?:diga|diz|responda|afirme|informe)\s+sempre\b[^.\n]{0,50}?(?:segur|sem\s+(?:vulnerabilidades|problemas))|\bsempre\s+(?:diga|responda|afirme)\b[^.\n]{0,50}?segur",
        Some(universal_not_negated),
    ));
    v.push(rule(
        "suppress_findings.pt",
        &["vulnerabilidade", "segurança"],OVERRIDE,
        High,
        r"\bn[ãa]o\s+(?:mencione|mencionem|relate|reporte|informe|cite|fale\s+(?:de|sobre)|inclua|aponte|mencionar|reportar|mostre)\b[^.\n]{0,30}?(?:vulnerabilidade|falhas?\s+de\s+segurança|problemas?\s+de\s+segurança|riscos?\s+de\s+segurança)",
        None,
    ));
    // Dutch
    let nl_noun = r"(?:instructies|instructie|regels|opdrachten|aanwijzingen|richtlijnen|prompts?|systeemprompt)";
    v.push(rule(
        "ignore_previous.nl",
        &["negeer", "vergeet", "negeren", "vergeten", "veronachtza"],OVERRIDE,
        High,
        &format!(
            r"\b(?:negeer|negeert|vergeet|negeren|vergeten|veronachtzaam)\s+(?:(?:(?:alle|de|je|jouw|uw)\s+)*(?:vorige|eerdere|voorgaande|bovenstaande|oorspronkelijke|oude|gegeven|huidige)\s+{nl_noun}|(?:alle|je|jouw|uw)\s+(?:[\w-]+\s+)?{nl_noun}|alles\s+(?:wat|hierboven)|het\s+bovenstaande)|\b(?:vorige|eerdere|voorgaande|bovenstaande|alle)\s+{nl_noun}\s+(?:[\w-]+\s+)?(?:negeren|vergeten)\b"
        ),
        None,
    ));
    v.push(rule(
        "you_are_now.nl",
        &["bent nu", "bent vanaf", "ben je", "vanaf nu", "vanaf heden"],OVERRIDE,
        High,
        r"\b(?:je|jij|u)\s+bent\s+(?:nu|vanaf\s+nu)\s+(?:een|de|het|mijn|vrij|zonder|geen|dan|\w*gpt)\b|\bnu\s+ben\s+je\s+(?:een|de|het|mijn|vrij|zonder|geen|dan|\w*gpt)\b|\bvanaf\s+(?:nu|heden)\s*,?\s+(?:ben\s+je|moet\s+je|zeg\s+je|je|jij|antwoord|zeg|meld|ben|geef|negeer|markeer)\b",
        None,
    ));
    v.push(rule(
        "new_system_prompt.nl",
        &["nieuwe"],
        OVERRIDE,
        High,
        r"\bnieuwe\s+(?:systeemprompt|systeeminstructies?|systeem[\s-]prompt|instructies\s*:)",
        None,
    ));
    v.push(rule(
        "report_safe.nl",
        &["meld", "rapporteer", "markeer", "classificeer", "beschouw", "beoordeel", "behandel", "label", "noem", "zeg altijd"],OVERRIDE,
        High,
        r"\b(?:meld|rapporteer|markeer|classificeer|beschouw|beoordeel|behandel|label|noem)\s+(?:[\w-]+\s+){0,5}?(?:als\s+)?(?:veilig|onschadelijk|schoon|goedgekeurd)\b|\bzeg\s+altijd\b[^.\n]{0,50}?(?:veilig|geen\s+(?:kwetsbaarheden|problemen))",
        Some(universal_not_negated),
    ));
    v.push(rule(
        "suppress_findings.nl",
        &["kwetsbaarhe", "beveiligings", "lekken"],OVERRIDE,
        High,
        r"\b(?:vermeld|noem|meld|rapporteer|benoem)\s+(?:geen|nooit|niet)\b[^.\n]{0,30}?(?:kwetsbaarhe(?:id|den)|beveiligingsproblemen|beveiligingslekken|lekken|beveiligingsrisico)|\bgeen\s+kwetsbaarheden\s+(?:vermelden|noemen|melden)",
        None,
    ));
    // Russian
    v.push(rule(
        "ignore_previous.ru",
        &["игнорир", "проигнорир", "забуд", "не обраща", "отбрось", "пренебрег", "отмени"],OVERRIDE,
        High,
        r"(?:игнорируй(?:те)?|проигнорируй(?:те)?|забудь(?:те)?|не\s+обращай(?:те)?\s+внимания\s+на|отбрось(?:те)?|пренебреги(?:те)?|отмени(?:те)?)\s+(?:[\w-]+\s+){0,3}?(?:инструкци\w*|указани\w*|правил\w*|команд\w*|промпт\w*|распоряжени\w*|установк\w*|всё\s+(?:что|вышесказанное|выше)|все\s+вышесказанное)",
        None,
    ));
    v.push(rule(
        "you_are_now.ru",
        &["теперь", "отныне", "с этого момента", "с сегодняшнего", "впредь"],OVERRIDE,
        High,
        r"(?:^|[^\w])(?:теперь|отныне|с\s+этого\s+момента|с\s+сегодняшнего\s+дня|впредь)\s*,?\s+(?:ты|вы)\s|(?:^|[^\w])(?:ты|вы)\s+(?:теперь|отныне)\s",
        None,
    ));
    v.push(rule(
        "new_system_prompt.ru",
        &["нов"],OVERRIDE,
        High,
        r"нов(?:ый|ые|ая|ое|ые)\s+(?:системн\w+\s+(?:промпт\w*|инструкци\w*|сообщени\w*|подсказк\w*|указани\w*)|инструкци\w*\s*:)",
        None,
    ));
    v.push(rule(
        "report_safe.ru",
        &["безопасн", "чист", "уязвимост"],OVERRIDE,
        High,
        r"(?:сообщай(?:те)?|отмечай(?:те)?|помечай(?:те)?|считай(?:те)?|классифицируй(?:те)?|оценивай(?:те)?|указывай(?:те)?|пиши(?:те)?|говори(?:те)?|отвечай(?:те)?|называй(?:те)?)\s[^.\n]{0,50}?(?:безопасн\w*|чист\w*|без\s+уязвимост\w*|нет\s+уязвимост\w*)",
        Some(universal),
    ));
    v.push(rule(
        "suppress_findings.ru",
        &["уязвимост", "безопасност", "дыр"],OVERRIDE,
        High,
        r"не\s+(?:упоминай(?:те)?|сообщай(?:те)?|указывай(?:те)?|говори(?:те)?|пиши(?:те)?|отмечай(?:те)?|называй(?:те)?|упоминать|сообщать)\s[^.\n]{0,30}?(?:уязвимост\w*|проблем\w*\s+безопасност\w*|дыр\w*)",
        None,
    ));
    // Chinese (simplified and traditional)
    v.push(rule(
        "ignore_previous.zh",
        &["忽略", "无视", "無視", "忽视", "忽視", "不要理会", "不要理會", "不理会", "不理會", "别管", "別管", "忘记", "忘記", "忘掉", "抛开", "拋開", "丢弃", "丟棄", "放弃", "放棄"],OVERRIDE,
        High,
        r"(?:忽略|无视|無視|忽视|忽視|不要理会|不要理會|不理会|不理會|别管|別管|忘记|忘記|忘掉|抛开|拋開|丢弃|丟棄|放弃|放棄)(?:掉)?(?:你)?(?:之前|以前|先前|上面|上述|以上|前面|此前|原来|原來|原有|原先|所有|全部|一切|的|你的|系统|系統|先前的|\s)*(?:的)?(?:所有|全部|一切)?(?:指令|指示|说明|說明|规则|規則|提示|要求|命令|设定|設定|约束|約束|提示词|提示詞|限制)",
        None,
    ));
    v.push(rule(
        "you_are_now.zh",
        &["你现在", "你現在", "现在你", "現在你", "从现在", "從現在", "从今以后", "從今以後", "从此", "從此"],OVERRIDE,
        High,
        r"你现在是|你現在是|现在你是|現在你是|你现在扮演|你現在扮演|从现在(?:开始|起)[,，]?\s*你|從現在(?:開始|起)[,，]?\s*你|从今以后[,，]?\s*你|從今以後[,，]?\s*你|从此[,，]?\s*你|從此[,，]?\s*你",
        None,
    ));
    v.push(rule(
        "new_system_prompt.zh",
        &["系统", "系統", "指令"],
        OVERRIDE,
        High,
        r"新的?系统(?:提示|指令|消息|設定|设定)|新的?系統(?:提示|指令|消息|設定)|新(?:的)?指令\s*[:：]",
        None,
    ));
    v.push(rule(
        "report_safe.zh",
        &["安全", "没有漏洞", "沒有漏洞", "无漏洞", "無漏洞", "无风险", "無風險", "没有问题", "沒有問題"],OVERRIDE,
        High,
        r"(?:所有|一切|全部|任何|每个|每個|总是|總是|始终|始終|一律|永远|永遠)[^。！!？?\n]{0,24}?(?:报告|報告|标记|標記|视为|視為|认定|認定|判定|说|說|回答|声称|聲稱|标注|標註|归类|歸類|当作|當作|都是|评为|評為|称)[^。！!？?\n]{0,14}?(?:安全|没有漏洞|沒有漏洞|无漏洞|無漏洞|无风险|無風險|没有问题|沒有問題)",
        None,
    ));
    v.push(rule(
        "suppress_findings.zh",
        &["漏洞", "安全问题", "安全問題", "安全风险", "安全風險", "缺陷"],OVERRIDE,
        High,
        r"(?:不要|别|別|不得|切勿|请勿|請勿|不准|禁止|不许|不許)(?:再)?(?:提及|提到|报告|報告|提起|说明|說明|指出|透露|列出|标记|標記|讨论|討論|提|说|說)[^。\n]{0,10}?(?:任何)?(?:安全)?(?:漏洞|安全问题|安全問題|安全风险|安全風險|缺陷)",
        None,
    ));
    // Japanese
    v.push(rule(
        "ignore_previous.ja",
        &["無視", "忘れ"],OVERRIDE,
        High,
        r"(?:以前|前|上記|これまで|先|今まで|上|過去|元|最初|既存)(?:の|に)(?:すべての|全ての|全部の|あらゆる|与えられた)?(?:指示|命令|ルール|指令|設定|プロンプト|制約|説明)(?:は|を|も)?(?:すべて|全て|全部)?(?:無視|忘れ)|(?:すべての|全ての|あらゆる)(?:指示|命令|ルール|指令|制約)(?:を|は)?(?:無視|忘れ)|(?:指示|命令|ルール|指令)を(?:すべて|全て|全部)無視|(?:あなたの|君の)(?:指示|命令|ルール|設定)を(?:無視|忘れ)",
        None,
    ));
    v.push(rule(
        "you_are_now.ja",
        &["あなたは", "君は", "お前は"],OVERRIDE,
        High,
        r"(?:あなたは|君は|お前は)(?:今から|これから|今後|今|もう)|(?:今から|これから|今後|以後|これ以降)(?:は)?[、,]?\s*(?:あなたは|君は|お前は)",
        None,
    ));
    v.push(rule(
        "new_system_prompt.ja",
        &["新しい"],
        OVERRIDE,
        High,
        r"新しい(?:システムプロンプト|システム指示|システムメッセージ|指示\s*[:：])",
        None,
    ));
    v.push(rule(
        "report_safe.ja",
        &["安全", "問題な", "問題が", "脆弱性"],OVERRIDE,
        High,
        r"(?:すべて|全て|全部|常に|いつも|必ず|どんな|あらゆる)[^。\n]{0,25}?(?:安全|問題なし|問題ない|問題がない|脆弱性はない|脆弱性なし|脆弱性がない)(?:だ|です|である)?(?:と|として)[^。\n]{0,10}?(?:報告|言|答|回答|判定|記載|評価|出力|扱|述べ|伝え)|(?:安全|問題なし|問題ない)(?:だ|です)?(?:と|として)[^。\n]{0,6}?(?:常に|いつも|必ず)",
        None,
    ));
    v.push(rule(
        "suppress_findings.ja",
        &["脆弱性", "セキュリティ"],OVERRIDE,
        High,
        r"(?:脆弱性|セキュリティ(?:上の)?問題|セキュリティリスク)(?:について|に関して|には|は|を|に)?[^。\n]{0,8}?(?:言及|触れ|報告|指摘|記載|説明)(?:し)?(?:ないで|てはいけない|するな|しないこと|禁止|しないでください)",
        None,
    ));
    // Polish
    v.push(rule(
        "ignore_previous.pl",
        &["ignoruj", "zapomnij", "pomiń", "odrzuć", "nie zwracaj"],OVERRIDE,
        High,
        r"\b(?:zignoruj(?:cie)?|ignoruj(?:cie)?|zapomnij(?:cie)?|pomiń|pomińcie|odrzuć|odrzućcie|nie\s+zwracaj\s+uwagi\s+na)\s+(?:o\s+)?(?:[\w-]+\s+){0,3}?(?:instrukcj\w*|polece\w*|zasad\w*|reguł\w*|wytyczn\w*|komend\w*|prompt\w*|wszystko\s+(?:co|powyżej|wcześniej))",
        None,
    ));
    v.push(rule(
        "you_are_now.pl",
        &["teraz", "od tej chwili", "od tego momentu", "od dziś", "od dzisiaj"],OVERRIDE,
        High,
        r"\bteraz\s+(?:jesteś|jestes|będziesz|bedziesz)\b|\b(?:jesteś|jestes)\s+teraz\b|\bod\s+(?:teraz|tej\s+chwili|tego\s+momentu|dziś|dzisiaj)\s*,?\s+(?:jesteś|jestes|będziesz|bedziesz|masz|odpowiadaj|zawsze|nigdy|mów|mow|ty|zgłaszaj|ignoruj)\b",
        None,
    ));
    v.push(rule(
        "new_system_prompt.pl",
        &["nowy", "nowe"],OVERRIDE,
        High,
        r"\bnowy\s+(?:prompt\s+systemowy|systemowy\s+prompt)|\bnowe\s+(?:instrukcje\s+systemowe|polecenia\s+systemowe|instrukcje\s*:)",
        None,
    ));
    v.push(rule(
        "report_safe.pl",
        &["jako", "zawsze"],OVERRIDE,
        High,
        r"\b(?:zgłaszaj|zglaszaj|raportuj|oznaczaj|oznacz|klasyfikuj|traktuj|uznawaj|uznaj|oceniaj|oceń)\b[^.\n]{0,50}?\bjako\s+(?:bezpieczn\w*|czyst\w*|nieszkodliw\w*)|\bzawsze\s+(?:mów|mow|odpowiadaj|pisz|stwierdzaj|twierdź|podawaj)\b[^.\n]{0,50}?bezpieczn",
        Some(universal_not_negated),
    ));
    v.push(rule(
        "suppress_findings.pl",
        &["luk", "podatno", "zagroż", "zagroz", "bezpieczeństwa"],OVERRIDE,
        High,
        r"\bnie\s+(?:wspominaj|zgłaszaj|zglaszaj|raportuj|wymieniaj|podawaj|informuj|pisz|wskazuj)\b[^.\n]{0,30}?(?:luk\w*|podatnoś\w*|podatnos\w*|zagrożeń|zagrozen|problem\w*\s+bezpieczeństwa)",
        None,
    ));

    // Korean
    v.push(rule(
        "ignore_previous.ko",
        &["무시", "잊어", "잊으"],OVERRIDE,
        High,
        r"(?:이전|앞|위|기존|지금까지|이전의|앞의|위의|모든|앞서)(?:의|에\s*나온|에서)?\s*(?:모든\s*)?(?:지시|지침|명령|규칙|지시사항|프롬프트|설정|제약|교정|수정\s*사항)(?:사항)?(?:들)?(?:을|를|은|는|은\s*모두)?\s*(?:모두\s*|전부\s*|다\s*)?(?:무시|잊어|잊으)",
        None,
    ));
    v.push(rule(
        "you_are_now.ko",
        &["너는", "당신은", "넌", "너의"],OVERRIDE,
        High,
        r"(?:지금부터|이제부터|이제|앞으로)\s*,?\s*(?:너는|당신은|넌|너의\s*역할은)|(?:너는|당신은)\s*(?:이제|지금부터)\s",
        None,
    ));
    v.push(rule(
        "new_system_prompt.ko",
        &["시스템"],
        OVERRIDE,
        High,
        r"새로운?\s*시스템\s*(?:프롬프트|지시|메시지|지침)",
        None,
    ));
    v.push(rule(
        "report_safe.ko",
        &["안전"],OVERRIDE,
        High,
        r"(?:항상|모든|모두|언제나|무조건|전부)[^.\n]{0,30}?안전(?:하다고|한\s*것으로|함으로)\s*(?:답|보고|말|응답|표시|판단|분류|평가)",
        None,
    ));
    v.push(rule(
        "suppress_findings.ko",
        &["취약점", "보안"],OVERRIDE,
        High,
        r"(?:취약점|보안\s*문제|보안\s*이슈)(?:을|를|은|는|에\s*대해(?:서)?(?:는)?)?\s*(?:절대\s*)?(?:언급|보고|지적|말)(?:하지|하지는)\s*(?:마|말)",
        None,
    ));
    // Common phrasings in further languages: uk, tr, ar, hi, vi, id, sv/da/no, cs, el, he.
    v.push(rule(
        "ignore_previous.other",
        &["ігнору", "забудь", "yok say", "görmezden", "unut", "dikkate alma", "تجاهل", "انس", "اهمل", "أهمل", "अनदेखा", "नजरअंदाज", "नज़रअंदाज़", "भूल", "bỏ qua", "phớt lờ", "quên", "lờ đi", "abaikan", "lupakan", "acuhkan", "ignorera", "glöm", "strunta", "ignorer", "glem", "ignoruj", "zapomeň", "nevšímej", "αγνόησε", "αγνοήστε", "ξέχασε", "ξεχάστε", "התעלם", "שכח"],OVERRIDE,
        High,
        r"(?:ігноруй(?:те)?|проігноруй(?:те)?|забудь(?:те)?)\s+(?:[\w-]+\s+){0,3}?(?:інструкці\w*|вказівк\w*|правил\w*|команд\w*)|(?:önceki|yukarıdaki|tüm|bütün|eski)\s+(?:\w+\s+)?(?:talimatları|talimatlar[ıi]|kuralları|komutları|yönergeleri)\s+(?:yok\s+say|görmezden\s+gel|unut|dikkate\s+alma)|(?:تجاهل|تجاهلي|انس|انسى|اهمل|أهمل)\s+(?:\S+\s+){0,3}?(?:التعليمات|الإرشادات|التوجيهات|الأوامر|القواعد)|(?:पिछले|पिछली|पहले\s+के|सभी|ऊपर\s+के|ऊपर\s+दिए)\s+(?:\S+\s+){0,2}?(?:निर्देशों|निर्देश|नियमों|आदेशों)\s+(?:को\s+)?(?:अनदेखा|नजरअंदाज|नज़रअंदाज़|भूल)|(?:bỏ\s+qua|phớt\s+lờ|quên|lờ\s+đi)\s+(?:\S+\s+){0,3}?(?:hướng\s+dẫn|chỉ\s+dẫn|chỉ\s+thị|quy\s+tắc)|\b(?:abaikan|lupakan|acuhkan)\s+(?:\w+\s+){0,3}?(?:instruksi|petunjuk|perintah|aturan|arahan)\b|\b(?:ignorera|glöm|strunta\s+i|ignorer|glem)\s+(?:(?:alla|alle|dina|dine|de|tidigare|tidligere|föregående|forrige|ovanstående)\s+)+(?:instruktioner|instruktionerna|instruksjoner|instruksjonene|instruktionerne|regler|reglerna|kommandon|anvisningar)\b|\b(?:ignoruj(?:te)?|zapomeň(?:te)?|nevšímej\s+si)\s+(?:\w+\s+){0,3}?(?:pokyn\w*|instrukc\w*|pravid\w*|příkaz\w*)|(?:αγνόησε|αγνοήστε|ξέχασε|ξεχάστε)\s+(?:\S+\s+){0,3}?(?:οδηγίες|εντολές|κανόνες)|(?:התעלם|התעלמי|שכח|שכחי)\s+(?:\S+\s+){0,3}?(?:מההוראות|ההוראות|מהוראות|הוראות|מהכללים|הכללים)",
        None,
    ));
    v.push(rule(
        "you_are_now.other",
        &["тепер", "з цього моменту", "artık", "bundan sonra", "şu andan", "الآن", "अब से", "bây giờ", "từ giờ", "sekarang", "du är nu", "du er nu", "du er nå", "från och med nu", "od teď", "od této"],OVERRIDE,
        High,
        r"(?:^|[^\w])(?:тепер|відтепер|з\s+цього\s+моменту)\s*,?\s+(?:ти|ви)\s|\b(?:artık|bundan\s+sonra|şu\s+andan\s+itibaren)\s+(?:sen|siz)\s|(?:أنت|انت)\s+الآن|من\s+الآن\s+فصاعدا|अब\s+से\s+(?:तुम|आप)|(?:bây\s+giờ|từ\s+giờ|từ\s+bây\s+giờ)\s*,?\s+(?:bạn|mày)\s+(?:là|sẽ|phải)|\b(?:sekarang|mulai\s+sekarang)\s*,?\s+(?:kamu|anda)\s+(?:adalah|akan|harus)\b|\b(?:du\s+är\s+nu|du\s+er\s+nu|du\s+er\s+nå|från\s+och\s+med\s+nu\s+är\s+du)\b|\b(?:od\s+teď|od\s+této\s+chvíle)\s*,?\s+(?:jsi|budeš)\b",
        None,
    ));

    // ---- Role and fence markers ----
    v.push(rule("chat_template_token", &["<|"], ROLE_MARKER, High, r"<\|\s*[a-z_][\w.-]{0,30}\s*\|>", None));
    v.push(rule(
        "llama_markers",
        &["inst]", "sys>>", "system]", "sys]"],
        ROLE_MARKER,
        High,
        r"\[/?INST\]|<</?SYS>>|\[/?SYSTEM\]|\[/?SYS\]",
        None,
    ));
    v.push(rule(
        "fence_tag",
        &["sys", "prior", "instruction", "im_", "assistant", "human", "developer_message"],ROLE_MARKER,
        High,
        r"<\s*/?\s*(?:system|system_prompt|system-prompt|systemprompt|prior_corrections|prior-corrections|instructions?|sys|im_start|im_end|assistant|human|developer_message|system_message)\s*/?\s*>",
        None,
    ));
    v.push(rule(
        "markdown_role_heading",
        &["##"],ROLE_MARKER,
        High,
        r"#{2,}\s*(?:instruction|instructions|system|system\s+prompt|system\s+message|new\s+instructions?|human|assistant|response|user|input)\s*(?::|$)",
        None,
    ));
    v.push(rule(
        "turn_prefix",
        &[":"],
        ROLE_MARKER,
        Medium,
        r"(?-i:^[\s>-]*(?:SYSTEM|ASSISTANT|HUMAN|USER|Assistant|Human|AI|Bot)\s*:\s*\S|\n[\s>-]*System\s*:\s*\S)",
        None,
    ));
    v.push(rule(
        "turn_prefix_inline",
        &[":"],ROLE_MARKER,
        Medium,
        r"(?-i:(?:[.!?]\s+|\s\s)(?:SYSTEM|ASSISTANT|HUMAN|Human|Assistant|System)\s*:\s+\S|\b(?:SYSTEM|ASSISTANT)\s*:\s)",
        None,
    ));

    v.push(rule(
        "turn_markers",
        &["start_of_turn", "end_of_turn", "[inst]"],
        ROLE_MARKER,
        High,
        r"<\s*/?\s*(?:start_of_turn|end_of_turn)\s*>|<\s*/?\s*s\s*>\s*\[INST\]",
        None,
    ));
    v.push(rule(
        "system_message_json",
        &["role"],ROLE_MARKER,
        High,
        r#"[{,]\s*[\x22']role[\x22']\s*:\s*[\x22'](?:system|developer)[\x22']\s*,\s*[\x22']content[\x22']\s*:\s*[\x22'][^\x22'\n]{8,}"#,
        None,
    ));
    v.push(rule(
        "prompt_banner",
        &["---", "[system", "[admin", "[developer", "[operator", "end of"],ROLE_MARKER,
        High,
        r"-{3,}\s*(?:begin|end|start)\s+(?:of\s+)?(?:system|new|hidden|admin|developer)\s+(?:prompt|instructions?|message)\s*-{3,}|\[(?:system|admin|developer|operator)\s+(?:message|note|override|instructions?|prompt)\]|\bend\s+of\s+(?:prior\s+corrections|prior_corrections|untrusted\s+(?:data|input|content)|reference\s+data)\b|(?-i:\bEND OF (?:CONTEXT|INPUT|USER INPUT|DOCUMENT|NOTES|CORRECTIONS|DATA)\b)",
        None,
    ));
    v.push(rule(
        "template_role_block",
        &["{{#", "{{/", "assistant", "human"],ROLE_MARKER,
        High,
        r"\{\{#(?:system|user|assistant)\}\}|\{\{/(?:system|user|assistant)\}\}|(?:[.!?]\s+|^)(?:assistant|human)\s*:\s+\S",
        None,
    ));
    v.push(rule(
        "react_action",
        &["action input"],
        TOOL_CALL,
        High,
        r"^\s*Action\s*:\s*[\w.-]+\s*\n\s*Action\s+Input\s*:",
        None,
    ));

    // ---- Tool calls and shell pipes ----
    let shell =
        r"(?:sh|bash|zsh|dash|ksh|fish|python[23]?(?:\.\d+)?|perl|ruby|node|php|iex|invoke-expression|pwsh|powershell)";
    v.push(rule(
        "curl_pipe_shell",
        &["curl", "wget", "iwr", "irm", "invoke-", "fetch"],TOOL_CALL,
        High,
        &format!(
            r#"\b(?:curl|wget|iwr|irm|invoke-webrequest|invoke-restmethod|fetch)\b[^\n|;]{{0,300}}?(?:https?://|ftp://|\b[\w-]+(?:\.[\w-]+)+/)[^\n|]{{0,300}}\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+(?:\S+=\S+\s+)*)?(?:/usr/bin/|/bin/|/usr/local/bin/)?{shell}\b|\b{shell}\s+<\(\s*(?:curl|wget)\b|\b(?:eval|{shell}\s+-c)\s*["']?\s*\$\(\s*(?:curl|wget)\b"#
        ),
        None,
    ));
    v.push(rule(
        "shell_c_payload",
        &["sh -c"],TOOL_CALL,
        High,
        r#"\b(?:ba|z|da)?sh\s+-c\s+["'][^"'\n]{0,200}(?:curl\s|wget\s|\bnc\s|ncat\s|/dev/tcp|base64\s+(?:-d|--decode)|rm\s+-rf|chmod\s+\+x|python[23]?\s+-c|\beval\b|/etc/passwd|/etc/shadow|\.ssh/)"#,
        None,
    ));
    v.push(rule(
        "reverse_shell",
        &["/dev/tcp/", "sh -i", "nc", "netcat", "mkfifo", "socat"],TOOL_CALL,
        High,
        r"/dev/tcp/[\w.-]+/\d+|\b(?:ba)?sh\s+-i\s*(?:>&|2>&1|>)|\b(?:nc|ncat|netcat)\s[^\n|;]{0,100}\s-(?:e|c)\s+\S*(?:sh|bash|cmd|powershell)\b[^\n|;]{0,60}?\s\d{2,5}\b|\b(?:nc|ncat|netcat)\s[^\n|;]{0,80}?\s\d{2,5}\s[^\n|;]{0,40}?-(?:e|c)\s+\S*(?:sh|bash|cmd|powershell)\b|\bmkfifo\b[^\n]{0,80}\b(?:nc|ncat|netcat)\b|\bsocat\b[^\n]{0,80}exec:",
        None,
    ));
    v.push(rule(
        "rm_rf_root",
        &["rm "],TOOL_CALL,
        High,
        r#"\brm\s+(?:-[a-z]*r[a-z]*f[a-z]*|-[a-z]*f[a-z]*r[a-z]*|-r\s+-f|-f\s+-r|--recursive\s+--force|--force\s+--recursive)\s+(?:--no-preserve-root\s+)?(?:/\*?|~/?|\$HOME/?|\*|/(?:etc|home|usr|var|root|boot|bin|lib|opt|srv))(?:\s|$|["'`;&|)])"#,
        None,
    ));
    v.push(rule(
        "powershell_download_exec",
        &["iex", "invoke-expression", "downloadstring", "downloadfile", "webclient", "-e"],TOOL_CALL,
        High,
        r#"\b(?:iex|invoke-expression)\s*[\(\$"']|\|\s*(?:iex|invoke-expression)\b|\.\s*(?:downloadstring|downloadfile)\s*\(|\bnew-object\s+(?:system\.)?net\.webclient\b|\s-(?:enc|encodedcommand|e)\s+[A-Za-z0-9+/=]{20,}"#,
        None,
    ));
    v.push(rule(
        "shell_exfil",
        &["curl", "wget", "nc", "(", "eval", "python"],TOOL_CALL,
        High,
        r"\b(?:env|printenv|set|history|cat\s+\S*(?:\.env|credentials|id_rsa|id_ed25519|passwd|shadow|\.npmrc|\.netrc|\.pgpass|config\.json|\.git-credentials|kubeconfig|\.kube/config))\s*\|\s*(?:curl|wget|nc|ncat|netcat)\b|\bcurl\s[^\n]{0,200}?(?:-d|--data(?:-binary|-raw|-urlencode)?|-F|--form|--upload-file|-T)\s+[\x22']?@(?:-|/etc/|~/|\$HOME|\.env|\S*id_rsa|\S*\.ssh/)|\b(?:os\.system|subprocess\.(?:run|call|Popen|check_output)|child_process\.exec|exec|system|shell_exec|passthru|Runtime\.getRuntime\(\)\.exec)\s*\(\s*[\x22'\[]\s*(?:curl|wget|nc|bash|sh|rm\s+-rf|powershell)\b[^\n]{0,200}?(?:https?://|/dev/tcp|\|\s*(?:sh|bash)|rm\s+-rf\s+/)|\beval\s*\(\s*(?:atob|base64_decode|Buffer\.from|base64\.b64decode)\s*\(|\bpython[23]?\s+-c\s+[\x22'][^\x22'\n]{0,200}(?:socket\.|pty\.spawn|os\.dup2|subprocess|os\.system)",
        Some(not_negated),
    ));
    v.push(rule(
        "download_and_run",
        &["curl", "wget", "chmod", "download", "fetch", "grab", "run", "execute", ":()", "dd if", "mkfs", "reverse shell"],TOOL_CALL,
        High,
        r"\b(?:curl|wget)\s[^\n]{0,200}?https?://\S+[^\n]{0,120}?(?:&&|;)\s*(?:sudo\s+)?(?:(?:ba|z|da)?sh|python[23]?|perl|ruby|node)\s+\S+|\bchmod\s+\+x\s+\S+\s*(?:&&|;)\s*(?:sudo\s+)?\./\S+|\b(?:download|fetch|grab)\s+and\s+(?:run|execute|install)\s+[^\n]{0,40}?https?://|\b(?:run|execute)\s+(?:the\s+)?(?:script|binary|payload|installer|file)\s+(?:at|from)\s+https?://|:\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:|\bdd\s+if=/dev/(?:zero|random|urandom)\s+of=/dev/(?:[sh]d[a-z]|nvme\d)|\bmkfs(?:\.\w+)?\s+/dev/(?:[sh]d[a-z]|nvme\d)|\breverse\s+shell\s+(?:to|on|back\s+to|at)\s+[\w.-]+[:\s]\d{2,5}\b",
        Some(not_negated),
    ));
    v.push(rule(
        "sensitive_command",
        &["execute", "run", "chmod"],TOOL_CALL,
        High,
        r"\b(?:execute|run)\s+(?:sudo\s+)?(?:cat|curl|wget|nc|bash|sh|chmod|cp|scp|python[23]?|powershell|type|less|head|tail)\s+[^\n]{0,60}?(?:/etc/passwd|/etc/shadow|\.ssh/|id_rsa|id_ed25519|\.aws/credentials|/dev/tcp|\.env(?:[\s;|)]|$)|\.git-credentials|\.npmrc|\.pgpass)|\bchmod\s+(?:-R\s+)?(?:777|a\+rwx)\s+/(?:\s|$)",
        Some(not_negated),
    ));
    v.push(rule(
        "tool_call_markup",
        &["tool", "function", "invoke", "antml"],TOOL_CALL,
        High,
        r"<\s*/?\s*(?:tool_call|tool_use|function_call|tool_calls|function_calls|tool_code|tool_result|function_results|invoke|antml:\w+)\b[^>\n]{0,80}>|<function=\w+",
        None,
    ));
    v.push(rule(
        "tool_call_json",
        &["tool", "function_call", "recipient_name", "\"name\"", "arguments", "parameters"],TOOL_CALL,
        High,
        r#"\{\s*"(?:tool|tool_name|tool_calls|tool_call|function_call|tool_use|recipient_name)"\s*:|"name"\s*:\s*"[^"\n]{1,80}"\s*,\s*"(?:arguments|parameters|args|input)"\s*:|"(?:arguments|parameters)"\s*:\s*\{[^}\n]{0,200}\}\s*,\s*"name"\s*:"#,
        None,
    ));
    v.push(rule(
        "call_tool_phrase",
        &["tool", "function"],TOOL_CALL,
        High,
        r#"\b(?:call|invoke|trigger|execute|use|run)\s+(?:the\s+)?(?:tool|function)\s+[`'"]?[a-z_][\w.-]*[`'"]?\s*(?:\(|with\b|to\b|and\b|now\b|passing\b|using\b)|\b(?:call|invoke|trigger)\s+(?:the\s+)?[`'"]?[a-z][\w.-]*[`'"]?\s+tool\b|\buse\s+(?:the\s+|your\s+)?[`'"]?[a-z][\w.-]*[`'"]?\s+tool\s+to\s+(?:run|execute|send|fetch|read|write|delete|post|upload|call|download|open|access|list)\b"#,
        Some(imperative_not_negated),
    ));
    v.push(rule(
        "execute_following",
        &["execute", "run "],TOOL_CALL,
        High,
        r"\bexecute\s+(?:the\s+following|this|these|the\s+below)\s+(?:shell\s+|bash\s+|terminal\s+|system\s+|powershell\s+|python\s+)?(?:commands?|code|script|payload|instructions?|snippet)\b|\bexecute\s+(?:the\s+following|this|the\s+below)\s*:|\bexecute\s+(?:the|this)\s+command\b|\brun\s+(?:the\s+following|this|these)\s+(?:shell\s+|bash\s+|terminal\s+|system\s+|powershell\s+)(?:commands?|script)\b|\brun\s+(?:the\s+following|this)\s+(?:commands?|script)\s*:",
        Some(imperative_not_negated),
    ));

    // ---- Exfiltration (phrases; images and URLs are checked in code) ----
    v.push(rule(
        "send_data_to",
        &["conversation", "chat", "transcript", "messages", "history", "api", "secret", "prompt", "instructions", "credential", "token", "password", "env", "session", "cookie", "key", "data", "pii", "source code"],EXFILTRATION,
        High,
        r"\b(?:send|append|post|forward|upload|transmit|leak|exfiltrate|email|e-mail|mail|submit|copy|paste|attach|encode|embed|include|deliver|relay|share|dump|push|pipe|put|add|insert|write|beacon|report)\s+(?:(?:the|all|your|this|any|every|our|my|of|entire|full|whole|complete|previous|prior|above|earlier|current|hidden|original|raw|user's|users'|user|these|those|its|their|chat|stored|saved|available|private|sensitive|secret|contents?\s+of|text\s+of|copy\s+of|summary\s+of|list\s+of|dump\s+of|values?\s+of)\s+)*(?:conversation(?:\s+history)?|chat(?:\s+(?:history|log|logs|transcript))?|transcript|previous\s+messages|messages|message\s+history|history|api[\s_-]?keys?|secrets?|system\s+prompt|prompt|instructions|credentials?|tokens?|passwords?|env(?:ironment)?\s+(?:variables|vars)|\.env(?:\s+file)?|session(?:\s+(?:cookies?|tokens?))?|cookies?|private\s+keys?|ssh\s+keys?|keys|user\s+data|personal\s+data|pii|source\s+code)\b",
        Some(exfil_destination),
    ));

    v.push(rule(
        "url_then_private",
        &["://"],EXFILTRATION,
        High,
        r"\b(?:send|post|call|fetch|request|visit|open|load|ping|hit|query|navigate\s+to|browse\s+to|make\s+a\s+request\s+to|upload\s+to|curl|wget)\s+[^\n]{0,20}?https?://[^ \n]+[^\n]{0,80}?\b(?:with|including|containing|carrying|appending|plus|and\s+(?:append|include|add|attach))\b[^\n]{0,40}?(?:conversation|chat\s+history|system\s+prompt|previous\s+messages|prior\s+messages|prior\s+corrections|secrets|environment\s+variables|env\s+vars)\b",
        Some(not_negated),
    ));
    let private_only = r"(?:system[\s-]?prompt\w*|systemprompt\w*|system[\s-]?nachricht\w*|system\s+message|prompt\s+(?:système|du\s+système|del\s+sistema|do\s+sistema|di\s+sistema)|chat[\s-]?(?:verlauf|history|log|transcript)|chatverlauf\w*|gesprächsverlauf\w*|conversation(?:\s+history)?|previous\s+messages|prior\s+messages|earlier\s+messages|vorherigen\s+nachrichten|historique\s+de\s+(?:la\s+)?conversation|historial\s+(?:del\s+chat|de\s+(?:la\s+)?conversación)|cronologia\s+della\s+chat|histórico\s+(?:da\s+conversa|do\s+chat)|chatgeschiedenis|системн\w+\s+промпт\w*|истори\w+\s+(?:чата|переписки|диалога)|系统提示\w*|系統提示\w*|聊天记录|聊天記錄|对话历史|對話歷史|システムプロンプト|会話履歴|prompt\w*\s+systemow\w*|histori\w+\s+(?:czatu|rozmowy)|시스템\s*프롬프트|대화\s*기록|prior[_\s]corrections)";
    v.push(rule(
        "private_data_query_url",
        &["://"],EXFILTRATION,
        High,
        &format!(
            r"{private_only}[^\n]{{0,120}}?https?://[^\s?]*\?[^\s]*=|https?://[^\s?]*\?[^\s]*=[^\n]{{0,120}}?{private_only}"
        ),
        Some(not_negated),
    ));
    v.push(rule(
        "send_private_multilingual",
        &["://", "www.", "@"],EXFILTRATION,
        High,
        r"\b(?:send|post|upload|forward|transmit|leak|exfiltrate|append|attach|embed|include|add|put|encode|envoie|envoyez|envoyer|transmets|ajoute|ajoutez|inclus|incluez|sende|senden|schicke|schick|übermittle|lade|hänge|häng|füge|envía|envia|envíe|manda|añade|agrega|incluye|invia|inviare|inviate|aggiungi|includi|allega|envie|enviar|adicione|anexe|inclua|stuur|verstuur|voeg|wyślij|prześlij|dołącz|dodaj|отправь|отправьте|перешли|добавь|приложи|发送|傳送|发给|附加|添加|送信|追加|添付|보내|첨부|추가)[^\n]{0,60}?(?:conversation|konversation|gespräch\w*|conversación|conversa|conversazione|gesprek|rozmow\w*|разговор\w*|переписк\w*|диалог\w*|对话|對話|会話|대화|previous\s+messages|prior\s+messages|earlier\s+messages|all\s+messages|nachrichten|mensajes|messaggi|mensagens|berichten|wiadomości|сообщени\w*|消息|メッセージ|메시지|secrets|geheimnisse|secretos|segreti|segredos|geheimen|sekrety|секрет\w*|密钥|api[\s_-]?keys?|clés?\s+api|claves?\s+(?:de\s+)?api|chiavi\s+api|chaves\s+de\s+api|credentials|zugangsdaten|identifiants|credenciales|credenziali|credenciais|пароли|токены|env(?:ironment)?\s+variables|\.env|system[\s-]?prompt\w*|systemprompt\w*|system[\s-]?nachricht\w*|system\s+message|prompt\s+(?:système|du\s+système|del\s+sistema|do\s+sistema|di\s+sistema)|chat[\s-]?(?:verlauf|history|log|transcript)|chatverlauf\w*|gesprächsverlauf\w*|conversation\s+history|previous\s+messages|vorherigen\s+nachrichten|historique\s+de\s+(?:la\s+)?conversation|historial\s+(?:del\s+chat|de\s+(?:la\s+)?conversación)|cronologia\s+della\s+chat|histórico\s+(?:da\s+conversa|do\s+chat)|chatgeschiedenis|системн\w+\s+промпт\w*|истори\w+\s+(?:чата|переписки|диалога)|系统提示\w*|系統提示\w*|聊天记录|聊天記錄|对话历史|對話歷史|システムプロンプト|会話履歴|prompt\w*\s+systemow\w*|histori\w+\s+(?:czatu|rozmowy)|시스템\s*프롬프트|대화\s*기록)[^\n]{0,80}?(?:https?://|\bwww\.|[\w.+-]+@[\w-]+\.\w+)",
        Some(not_negated),
    ));
    // Added after the blind test-split run (see the closing note of the guard issue): a persona given by name
    // ("you are now X, an assistant that ..."), instructions declared void, data to be put into a URL, and an
    // agent tool named as the way to run something.
    v.push(rule(
        "you_are_now_named",
        &["you"],OVERRIDE,
        High,
        r"\byou(?:'re|\s+are)\s+now\s+[\w-]+\s*,\s*(?:a|an|the|my|your)\s+(?:[\w-]+\s+){0,3}(?:assistant|ai|bot|model|reviewer|agent|persona|auditor|helper)\b",
        None,
    ));
    v.push(rule(
        "instructions_void",
        &["above", "so far", "given", "follow only", "follow just"],OVERRIDE,
        High,
        r"\b(?:instructions|rules|guidelines|directives|prompts?)\s+(?:above|so\s+far|you\s+(?:were|have\s+been)\s+given)\s+(?:are|is|were)\s+(?:now\s+)?(?:outdated|obsolete|void|invalid|revoked|superseded|cancell?ed|no\s+longer\s+(?:valid|in\s+effect|applicable|apply))\b|\bfollow\s+(?:only|just)\s+(?:this|these|my)\s+(?:note|notes|instructions?|message|rules?|lesson)\b",
        Some(not_negated),
    ));
    v.push(rule(
        "data_into_url",
        &["query string", "query param", "markdown image", "url of"],EXFILTRATION,
        High,
        r"\b(?:put|place|append|add|include|encode|embed|insert|send)\b[^\n]{0,80}?\b(?:in(?:to)?|to)\s+the\s+(?:query\s+string|url|query\s+param(?:eter)?s?)\s+of\s+(?:https?://|www\.)|\bas\s+an?\s+markdown\s+image\b[^\n]{0,40}?(?:https?://|www\.)|(?:https?://|www\.)[^\n]{0,80}?\bas\s+an?\s+markdown\s+image\b",
        Some(not_negated),
    ));
    v.push(rule(
        "agent_tool_use",
        &["tool"],TOOL_CALL,
        High,
        r"\b(?:execute|run|call|invoke|issue)\b[^\n]{0,80}?\b(?:via|using|through|with)\s+the\s+(?:sql|shell|bash|terminal|python|code|exec(?:ute)?|browser|http|file(?:system)?|database|db|command)\s+tool\b",
        Some(not_negated),
    ));
    // ---- Steering without an override verb: verdicts stated in advance, consensus claims that silence a
    // finding, requests to skip checks, output templates, notes addressed to the model. ----
    let clean = r#"(?:no\s+(?:[\w-]+\s+){0,2}(?:issues?|vulnerabilit(?:y|ies)|findings?|problems?|concerns?|risks?)(?:\s+found)?|safe|clean|secure|compliant|approved?|lgtm|ok|pass(?:ed)?|not\s+vulnerable|ready\s+to\s+merge|nothing\s+to\s+report)"#;
    v.push(rule(
        "verdict_preset",
        &["verdict", "answer", "output", "response", "result", "conclusion", "rating", "outcome"],
        STEERING,
        High,
        &format!(
            r#"\b(?:correct|right|expected|only\s+acceptable|required|final|official|approved|review|predetermined|pre-determined)\s+(?:verdict|answer|output|response|result|conclusion|rating|outcome)s?\b[^.;\n]{{0,60}}?\b(?:is|are|should\s+be|must\s+be|will\s+be|=|:)\s+(?:always\s+)?(?:that\s+)?(?:there\s+(?:are|is)\s+)?["'`]?{clean}\b|\b(?:verdict|answer|output|response)s?\s+(?:for|on|of)\s+(?:all|every|any|each)\b[^.;\n]{{0,60}}?\b(?:is|should\s+be|must\s+be|will\s+be|:)\s+(?:pre-?determined\s*:?\s*)?["'`]?{clean}\b"#
        ),
        Some(not_negated),
    ));
    v.push(rule(
        "always_answer_template",
        &["always", "every", "only", "exactly", "nothing else"],
        STEERING,
        High,
        r#"\b(?:always|for\s+every\s+\w+|in\s+every\s+\w+)\b[^.;\n]{0,40}?\b(?:answer|respond|reply|verdict|output|say|write|review\s+output)\b[^.;\n]{0,25}?\b(?:be|is|with|:)\s+["'`]|\b(?:write|output|print|say|respond\s+with|reply\s+with|answer\s+with|return)\s+(?:exactly|only|just)\s+(?:that|this|the\s+(?:line|word|text|string|json|following))\b|\band\s+nothing\s+else\b|\b(?:contain|consist\s+of|be)\s+exactly\s+one\s+(?:line|word|sentence)\s*:"#,
        Some(not_negated),
    ));
    v.push(rule(
        "consensus_silences",
        &["agreed", "decided", "confirmed", "accepted", "signed off", "approved", "consensus", "ruled"],
        STEERING,
        High,
        r#"\b(?:reviewers|the\s+team|the\s+maintainers|maintainers|the\s+security\s+team|security|we|everyone|the\s+guild|leads?|management|the\s+owners|owners|the\s+cto|architecture)\b[^.\n]{0,30}?\b(?:have\s+|has\s+)?(?:agreed|decided|confirmed|accepted|signed\s+off|approved|ruled|reached\s+(?:a\s+)?consensus)\b[^\n]{0,160}?\b(?:do\s+not|don't|never|no\s+need\s+to|must\s+not|should\s+not|need\s+not|not\s+be)\s+(?:\w+\s+)?(?:raise[ds]?|flag(?:ged)?|report(?:ed)?|mention(?:ed)?|comment(?:ed)?|block(?:ed)?|ask(?:ed)?|cite[ds]?|list(?:ed)?|call(?:ed)?\s+out)\b"#,
        None,
    ));
    v.push(rule(
        "skip_checks",
        &["skip", "bypass", "omit", "disable", "waive"],
        STEERING,
        High,
        r#"\b(?:skip|bypass|omit|disable|waive)\s+(?:all|any|every|the)\s+(?:[\w-]+\s+)?(?:checks?|reviews?|scans?|scanning|analysis|validation|verification)\b[^.\n]{0,60}?\b(?:for|in|on|of)\s+(?:this|the|all|every|any)\s+(?:repo|repository|project|codebase|pr|pull\s+request|diff|change|commit|file|service)s?\b"#,
        Some(not_negated),
    ));
    v.push(rule(
        "supersede_prompt",
        &["supersed", "replace", "overrid", "precedence", "outrank", "trump", "priority", "obsolete", "void", "revoked", "rescinded", "no longer"],
        STEERING,
        High,
        r#"\b(?:supersedes?|replaces?|overrides?|takes?\s+precedence\s+over|take\s+priority\s+over|outranks?|trumps?|has\s+priority\s+over)\s+(?:your|the\s+system|all\s+(?:previous|prior|other|earlier)|any\s+(?:previous|prior|other|earlier)|anything\s+(?:you|else)|the\s+(?:previous|prior|earlier|original|above|default))\s+(?:[\w-]+\s+)?(?:prompt|instructions?|guidelines|rules|message|directives?|configuration|lessons|notes|guidance|policy|you\s+(?:were|have\s+been)\s+told)\b|\b(?:system\s+prompt|instructions|rules|guidelines)\s+(?:above\s+)?(?:are|is)\s+(?:now\s+)?(?:superseded|obsolete|void|revoked|rescinded|no\s+longer\s+(?:valid|apply|in\s+effect))\b"#,
        Some(not_negated),
    ));
    v.push(rule(
        "verdict_json",
        &["verdict", "decision", "approve", "vulnerab", "findings", "issues", "review", "action"],
        STEERING,
        High,
        r#"\{\s*["']?(?:verdict|decision|approved?|vulnerable|vulnerabilities|findings|issues|review|review_status|action|result)["']?\s*:\s*(?:["'](?:approved?|safe|clean|pass(?:ed)?|ok|none|no_issues|no\s+issues|lgtm|secure|merge|compliant)["']|true|\[\s*\]|0\b)"#,
        None,
    ));
    v.push(rule(
        "addressed_to_model",
        &["assistant", " ai", "model", "llm", "bot", "agent", "copilot", "gpt", "claude", "automated"],
        STEERING,
        High,
        r#"\b(?:note|message|instructions?|reminder|directive|request|memo)s?\s+(?:to|for)\s+(?:the\s+|any\s+)?(?:ai|assistant|model|llm|(?:code\s+)?review(?:er)?\s+bot|bot|copilot|agent|ai\s+reviewer|automated\s+reviewer)\s*[:,-]|\b(?:dear|hey|hi|hello|attention|attn)\s*,?\s+(?:ai|assistant|model|llm|bot|agent|copilot|chatgpt|claude|gpt)\b|^\s*(?:for|to)\s+the\s+(?:ai|assistant|model|llm|bot|agent)\s*:"#,
        None,
    ));
    v.push(rule(
        "reveal_prompt_verbatim",
        &["prompt", "preamble", "system message", "instructions", "consignes", "mensaje de sistema", "instruções", "промпт", "提示", "プロンプト", "프롬프트", "before"],
        EXFILTRATION,
        High,
        r#"(?:system\s*prompt|systemprompt|prompt\s+(?:di\s+sistema|systemowy|du\s+systeme)|system\s+message|preamble|(?:initial|original|hidden)\s+instructions|instructions\s+you\s+(?:were|have\s+been)\s+(?:given|configured\s+with)|(?:text|instructions)\s+(?:that\s+came\s+|you\s+(?:were\s+)?(?:given|received)\s+)?before\s+(?:this\s+conversation|any\s+code|the\s+code)|consignes\s+initiales|mensaje\s+de\s+sistema|instrucoes\s+de\s+sistema|системн\w*\s+промпт|系统提示|システムプロンプト|시스템\s*프롬프트)[^\n]{0,60}?(?:verbatim|word\s+for\s+word|in\s+full|unabridged|unedited|woertlich|wortlich|mot\s+pour\s+mot|dosłownie|doslownie|дословно|原文|完整|그대로|전체|parola\s+per\s+parola|na\s+integra|completo)|(?:verbatim|word\s+for\s+word|in\s+full|unabridged|wortlich|mot\s+pour\s+mot|dosłownie|дословно|完整|parola\s+per\s+parola|na\s+integra)[^\n]{0,40}?(?:system\s*prompt|systemprompt|prompt\s+(?:di\s+sistema|systemowy)|system\s+message|preamble|consignes|instructions|мой\s+промпт|системн\w*\s+промпт|系统提示)|\b(?:relay|restate|quote|paste|reproduce|recite)\s+(?:back\s+)?(?:the|your)\s+(?:full\s+|entire\s+)?(?:preamble|system\s+message|system\s+prompt|instructions\s+you\s+(?:were|have\s+been)\s+(?:given|configured\s+with))"#,
        Some(not_negated),
    ));
    v.push(rule(
        "vocative_instruction",
        &["assistant", "ai", "model", "bot", "scanner", "reviewer", "llm", "agent", "助手"],
        STEERING,
        High,
        r#"(?:^|[^\w-])(?:assistant|ai\s+reviewer|ai|reviewer[\s-]bot|review[\s-]bot|reviewer\s+model|reviewer\s+ai|scanner|llm|agent|model|copilot)\s*[:,]\s+(?:please\s+)?(?:(?:before\s+(?:replying|answering|you\s+(?:reply|answer|respond))|from\s+now\s+on|for\s+this\s+\w+)\s*,?\s+)?(?:forget|ignore|disregard|supersede|pay\s+no|reveal|paste|print|output|approve|say|state|mark|respond|reply|answer|leave|skip|stop|don't|do\s+not|never|treat|classify|report|the\s+rules|your\s+(?:rules|instructions))\b|(?:给助手|致助手|助手)\s*[:：]"#,
        None,
    ));
    v.push(rule(
        "pay_no_attention",
        &["attention", "notice", "follow", "obey", "heed", "forget what", "told"],
        OVERRIDE,
        High,
        r#"\b(?:pay\s+no\s+attention\s+to|take\s+no\s+notice\s+of|(?:don't|do\s+not|no\s+longer|stop)\s+(?:follow(?:ing)?|obey(?:ing)?|heed(?:ing)?))\s+(?:the\s+|your\s+|any\s+|all\s+)?(?:prior|previous|earlier|above|original|system|existing|standing)\b|\bforget\s+(?:what|everything|anything)\s+you\s+(?:were|have\s+been|'ve\s+been)\s+told\b"#,
        None,
    ));
    v.push(rule(
        "section_breakout",
        &["</", "end of", "###"],
        ROLE_MARKER,
        High,
        r#"</(?:lessons?|notes?|corrections?|context|reference(?:_notes)?|examples?|user_input|untrusted\w*|retrieved\w*|feedback|review_notes)>[ \t]*(?:\n|<|$)|(?-i:\bEND OF (?:LESSONS?|NOTES?|REFERENCE\w*|EXAMPLES?|RETRIEVED\w*|CORRECTIONS?|FEEDBACK|INSTRUCTIONS?)\b)|#{2,}\s*end\s+of\s+(?:lessons?|notes?|corrections?|context|examples?|reference)"#,
        None,
    ));
    v.push(rule(
        "reviewer_config",
        &["mode", "findings", "report_categories", "auto_approve", "auto-approve"],
        STEERING,
        High,
        r#"\b(?:mode|review_mode|reviewer_mode|role)\s*[=:]\s*["']?(?:auto[_-]?approve|permissive|lenient|approve[_-]?all|unrestricted)\b|\b(?:findings|report_categories|checks)\s*[=:]\s*(?:none\b|\[\s*\])"#,
        None,
    ));
    v.push(rule(
        "apply_embedded",
        &["decode", "parse", "expand", "open", "read", "load", "treat", "apply", "follow"],
        STEERING,
        High,
        r#"\b(?:decode|parse|expand|open|read|deserialize)\b[^.\n]{0,40}?\band\s+(?:load|apply|execute|follow|obey|run|honou?r)\s+(?:it|them|this|that)\b|\b(?:load|treat|apply|use)\s+(?:that|this|the)\s+(?:block|text|note|config(?:uration)?|snippet|payload|comment)\s+as\s+(?:your|the)\s+(?:active\s+|new\s+|current\s+)?(?:configuration|config|instructions?|rules|policy|system\s+prompt)\b"#,
        None,
    ));
    // ---- Addressed to the model: its tools, its prompt, its environment (casual spellings `u`, `ur` too) ----
    let you = r"(?:you|u)";
    let your = r"(?:your|ur)";
    v.push(rule(
        "if_you_have_tools",
        &["tool", "agent", "shell", "perms", "permission", "push", "exec", "call", "access", "merge", "run"],
        TOOL_CALL,
        High,
        &format!(
            r"\bif\s+{you}(?:'re|\s+are|\s+r|\s+have|\s+can|'ve\s+got)\s+(?:an?\s+|any\s+|the\s+)?(?:[\w-]+\s+){{0,2}}(?:tools?|agent|shell|perms|permissions|access\s+to\s+(?:a\s+|the\s+)?(?:shell|tools?|github|the\s+repo))\b|\bif\s+{you}\s+can\s+(?:push|exec|call\s+tools|merge|run\s+commands)\b|\bcan\s+{you}\s+(?:call\s+tools|exec\s+into)\b|\b(?:use|using|via|with)\s+(?:the\s+|{your}\s+)(?:[\w-]+\s+)?tool\s+to\s+(?:apply|delete|push|merge|post|comment|open|file|send|set|add|write|make)\b|\b{your}\s+(?:ticket|comment|email|edit|fetch|shell|kubectl)\s+tool\b"
        ),
        Some(unquoted_not_negated),
    ));
    v.push(rule(
        "reveal_own_prompt",
        &["prompt", "instruction", "tool", "context", "token", "environment", "function", "credential", "key"],
        EXFILTRATION,
        High,
        &format!(
            r"\b(?:print|include|paste|show|list|describe|share|mail|send|output|give|dump|reveal|add)\b[^.\n]{{0,50}}?\b{your}\s+(?:own\s+|full\s+|entire\s+|system\s+|original\s+)?(?:prompt|instructions|context|tool\s+schema|tools|functions|environment|token|api\s+keys?|credentials)\b|\b(?:chars|characters|lines|words)\s+of\s+{your}\s+(?:system\s+)?prompt\b|\bwhat\s+(?:tools|functions|tools/functions)\s+(?:do\s+)?{you}\s+have\b|\bwhats?\s+the\s+token\s+{you}\s+use\b|\bdescribe\s+the\s+environment\s+{you}\s+run\b"
        ),
        Some(unquoted_not_negated),
    ));
    v.push(rule(
        "dump_environment",
        &["env", "whoami", "/var/run/secrets", "npmrc", "pypirc", "netrc", ".aws", ".docker", "shadow"],
        EXFILTRATION,
        High,
        r"\b(?:run|paste|show|include|print|list)\b[^\n]{0,40}?(?:\benv\s*(?:\||$)|\benv\s+and\s+(?:paste|show|include|print)|os\.environ|printenv|whoami\s*&&|/etc/shadow)|\b(?:contents\s+of|include|paste|read)\b[^\n]{0,30}?(?:~/\.(?:npmrc|pypirc|netrc|aws/credentials|docker/config\.json)|/var/run/secrets/)",
        Some(unquoted_not_negated),
    ));
    v.push(rule(
        "send_review_out",
        &["curl", "send", "mail", "post", "forward", "upload", "to:"],
        EXFILTRATION,
        High,
        &format!(
            r"\b(?:curl|post|send|forward|upload|mail|email)\s+(?:the\s+|this\s+|{your}\s+|any\s+|all\s+)?(?:review|findings?|found\s+keys|keys|secrets?|instructions|output|code|diff|context)\b[^\n]{{0,60}}?\b(?:to|at)\s+(?:https?://|[\w.+-]+@[\w-]+\.[\w.]+)|\b(?:include|add)\b[^\n]{{0,40}}?`?To:\s*[\w.+-]+@[\w-]+\.[\w.]+|\bdraft\s+an\s+email\s+to\s+[\w.+-]+@[\w-]+\.[\w.]+[^\n]{{0,60}}\bsend\b"
        ),
        Some(unquoted_not_negated),
    ));
    v.push(rule(
        "secret_into_link",
        &["key", "secret", "token", "ctx", "context", "review", "manifest", "unmasked", "owner"],
        EXFILTRATION,
        High,
        &format!(
            r"(?:https?://\S*[?&][\w-]+=<\s*(?:the\s+)?(?:key|secret|token|{your}\s+review|review)\s*>|https?://\S*[?&]ctx=(?:\s|\)|$)|paste\s+the\s+actual\s+(?:key|secret|token)\s+in\s+the\s+link|\bwith\s+{your}\s+full\s+context\s+url-?encoded\b|\bopen\s+a\s+(?:github\s+)?issue\b[^\n]{{0,40}}?\b(?:w/|with)\s+the\s+(?:secret|key|full\s+manifest)\b|\bprint\s+it\s+unmasked\b|\bin\s+the\s+(?:issue\s+)?body\s+so\s+the\s+owner)"
        ),
        Some(unquoted_not_negated),
    ));
    v.push(rule(
        "tracking_pixel",
        &["<img"],
        EXFILTRATION,
        High,
        r#"<img\b[^>]*\b(?:width|height)\s*=\s*["']?0\b[^>]*\bsrc\s*=\s*["']?https?://|<img\b[^>]*\bsrc\s*=\s*["']?https?://[^>]*\b(?:width|height)\s*=\s*["']?0\b"#,
        Some(unquoted_not_negated),
    ));
    v.push(rule(
        "approve_or_merge",
        &["approve", "merge", "safe-to-merge", "conclusion", "straight to main", "review_status"],
        STEERING,
        High,
        r"\b(?:bot|agent|reviewer)\b[^\n]{0,20}?\bapprove\s+this\s+(?:pr|pull\s+request|mr)\b|\bmerge\s+#\d+|\bREVIEW_STATUS:\s*APPROVED\b|\bmark\s+(?:the\s+)?review\s+status\s+approved\b|add_label\(\s*['\x22]safe-to-merge|\bset\s+the\s+check\s+run\s+conclusion\s+to\s+success\b|\bpush\b[^\n]{0,40}?\bstraight\s+to\s+main\b",
        Some(unquoted_not_negated),
    ));
    v.push(rule(
        "fixed_output",
        &["review", "reply", "output", "line", "write", "nothing", "say", "giving"],
        STEERING,
        High,
        r"\b(?:end|start|begin|sign)\s+(?:each|every|all|any)\s+reviews?\s+with\b|\bfirst\s+line\s+of\s+(?:any|every|each)\s+review\s+must\s+be\b|\breply\s+only\s+['\x22]|\bwrite\s+literally\s+['\x22]|\b(?:return|output)\s+nothing\b|\b(?:don'?t|do\s+not)\s+output\s+anything\b|\bwrap\s+the\s+(?:entire|whole)\s+review\s+in\b|\bwrite\s+reviews?\s+in\s+(?:base64|rot13|hex)\b|\breviews?\s+(?:comments\s+)?must\s+be\s+emoji\s+only\b|\boutput\s+\{[^}\n]*\}\s+no\s+matter\s+what\b|\breply\s+['\x22][^'\x22\n]{3,60}['\x22]\s+for\s+(?:all|every|any)\b|\bsay\s+['\x22][^'\x22\n]{3,60}['\x22]\s+and\s+stop\b|\bgiving\s+one\s+for\s+this\s+pr\b",
        Some(unquoted_not_negated),
    ));
    v.push(rule(
        "forced_rating",
        &["always", "rate", "score"],
        STEERING,
        High,
        r"\balways\s+rate\b[^\n]{0,40}?\b\d{1,3}\s*/\s*10\b|\b(?:severity|confidence|score|rating)\s+for\s+[^\n]{1,60}?\bis\s+always\s+(?:'[^']+'|\x22[^\x22]+\x22|[\d.]+\b|(?:info|low|none|pass)\b)",
        Some(unquoted_not_negated),
    ));
    v.push(rule(
        "named_agent_tool",
        &["tool", "http_post", "http_get", "write_file", "create_issue", "send_email", "run_shell", "exec_command", "fetch_url", "post_comment", "apply_patch", "edit_file", "delete_file"],
        TOOL_CALL,
        High,
        r"\b(?:call|invoke|use|run)\s+(?:the\s+)?(?:http_post|http_get|write_file|create_issue|send_email|run_shell|exec_command|fetch_url|post_comment|apply_patch|edit_file|delete_file)\b|\b(?:with|using|via)\s+the\s+(?:edit|shell|comment|ticket|fetch|email|kubectl|write|file|browser|terminal)\s+tool\b",
        Some(tool_use_check),
    ));
    v.push(rule(
        "force_pass",
        &["pass", "report", "success", "green", "approved", "suppress", "drop", "skip", "verify", "say"],
        STEERING,
        High,
        r#"\b(?:set|mark)\s+(?:the\s+)?(?:overall\s+)?(?:result|status|verdict|outcome|check)\s+(?:to|as)\s+(?:pass|passed|success|clean|approved|green)\b|\breport\s+(?:the\s+review|it|them|each|everything)\s+as\s+['"]?(?:clean|rotated|safe|passed|fixed|resolved)\b|\bpass\s+the\s+licen[cs]e\s+check\s+for\b|\bsuppress\s+(?:it\s+|them\s+|this\s+)?silently\b|\bdrop\s+(?:that|this|the)\s+check\s+from\b|\bskip\s+all\s+(?:the\s+)?(?:checks|findings|security\s+checks)\b|\b(?:dont|don't|do\s+not)\s+verify,?\s+(?:dont|don't|do\s+not)\s+comment\b|\bjust\s+say\s+['"][^'"\n]{3,60}['"]"#,
        Some(unquoted_not_negated),
    ));
    v
}
