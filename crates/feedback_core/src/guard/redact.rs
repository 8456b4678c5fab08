//! Secret redaction: each recognised secret becomes `[REDACTED:<kind>]`; every other byte is kept.
//!
//! Rules run in order, specific token formats first (PEM keys, cloud keys, vendor tokens, JWTs, bearer
//! tokens, passwords inside URLs), generic `password = ...` / `api_key: ...` assignments last. A rule never
//! touches an existing `[REDACTED:...]` placeholder, so redaction is idempotent.
//!
//! Assignments are redacted only when the value is a literal: placeholders (`<your key>`, `${VAR}`,
//! `{{ secrets.X }}`, `$VAR`, `***`, `changeme`, `YOUR_...`), environment lookups (`os.environ[...]`,
//! `process.env.X`, `os.getenv(...)`) and code (`password=password`, `get_password()`, `self.password`,
//! `password: str`) are left alone. Generic API-key values must also look random.

use std::ops::Range;
use std::sync::LazyLock;

use regex::{Captures, Regex};

/// The redacted text and one `kind` per replaced secret, in replacement order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    pub text: String,
    pub kinds: Vec<&'static str>,
}

/// A value check: `(captures, whole text) -> is a secret`.
type Valid = fn(&Captures, &str) -> bool;

struct SecretRule {
    kind: &'static str,
    re: Regex,
    /// Capture groups holding the secret; the first that took part is replaced (0 = the whole match).
    groups: &'static [usize],
    valid: Option<Valid>,
}

fn secret(kind: &'static str, pattern: &str, groups: &'static [usize], valid: Option<Valid>) -> SecretRule {
    let re = Regex::new(pattern).unwrap_or_else(|e| panic!("redaction pattern for {kind} does not compile: {e}"));
    SecretRule { kind, re, groups, valid }
}

static PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\[REDACTED:[a-z0-9_]+\]").expect("placeholder"));

/// Generic assignment: `key` (optionally quoted) `=`/`:`/`=>`/`:=`/`==`, then a quoted or bare value.
/// Groups: 1 key, 2 separator, 3 double-quoted value, 4 single-quoted value, 5 bare value.
fn assignment(key: &str) -> String {
    format!(
        r#"(?:^|[^\w.-])((?i:{key}))["']?(\s*(?:=>|:=|==|=|:)\s*)(?:"((?:[^"\\\n]|\\.){{0,300}})"|'((?:[^'\\\n]|\\.){{0,300}})'|([^\s,;'"`)\]}}<>]+))"#
    )
}

/// `"key", "value"`: a quoted key, a comma, a quoted value (header setters, tuples). Same groups as
/// [`assignment`], without a bare value.
fn quoted_pair(key: &str) -> String {
    format!(r#"["']((?i:{key}))["'](\s*,\s*)(?:"((?:[^"\\\n]|\\.){{0,300}})"|'((?:[^'\\\n]|\\.){{0,300}})')"#)
}

const PASSWORD_KEY: &str =
    r"[\w.-]*?(?:password|passwd|passphrase|pwd|pword)[\w.-]*|(?:[\w.-]*[_.-])?pass(?:[_.-][\w.-]*)?";
const API_KEY: &str = r"[\w.-]*?(?:api[_-]?key|apikey|api[_-]?secret|app[_-]?secret|client[_-]?secret|secret[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token|id[_-]?token|session[_-]?token|bearer[_-]?token|access[_-]?key|private[_-]?key|signing[_-]?key|encryption[_-]?key|master[_-]?key|license[_-]?key|webhook[_-]?secret|consumer[_-]?secret|credentials?|secret|token|auth)[\w.-]*";

static RULES: LazyLock<Vec<SecretRule>> = LazyLock::new(|| {
    // The header, optional `Proc-Type:`-style lines, then a base64 body (a bare header in prose is not a key).
    let pem = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:\s|\\[nr])*(?:[A-Za-z-]+:[^\n\\]*(?:\s|\\[nr])+)*[A-Za-z0-9+/=]{16}(?s:.*?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\z|\x22)";
    vec![
        // Private keys: inside a GCP service-account JSON, or anywhere.
        secret("gcp_service_account", pem, &[0], Some(service_account_context)),
        secret("private_key_pem", pem, &[0], None),
        secret("gcp_service_account", r#""private_key_id"\s*:\s*"([0-9a-f]{40})""#, &[1], None),
        // A PEM key stored base64-encoded (Kubernetes Secret `data:`): "-----BEGIN" encodes to "LS0tLS1CRUdJTi".
        secret("private_key_pem", r"\b(LS0tLS1CRUdJTi[A-Za-z0-9+/]{16,}={0,2})", &[1], Some(encoded_private_key)),
        // AWS: the secret next to its key id or under a secret-key name, then the key id itself.
        secret(
            "aws_secret_key",
            r#"(?i:aws_?secret_?(?:access_?)?key(?:_id)?|secret_?access_?key|aws_?secret|secretkey)["']?\s*(?:=>|:=|=|:)\s*["']?([A-Za-z0-9/+=]{40})(?:[^A-Za-z0-9/+=]|$)"#,
            &[1],
            Some(aws_secret_valid),
        ),
        secret(
            "aws_secret_key",
            r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b[^\n]{0,100}?(?:^|[^A-Za-z0-9/+=])([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)",
            &[1],
            Some(aws_secret_valid),
        ),
        secret(
            "aws_access_key",
            r"\b((?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA|ABIA|ACCA)[A-Z0-9]{16})\b",
            &[1],
            Some(not_example),
        ),
        secret("gcp_api_key", r"\b(AIza[0-9A-Za-z_-]{35})(?:[^0-9A-Za-z_-]|$)", &[1], None),
        secret(
            "azure_storage_key",
            r"(?i:AccountKey|SharedAccessKey|SharedSecret)\s*=\s*([A-Za-z0-9+/]{20,}={0,2})",
            &[1],
            Some(not_example),
        ),
        secret("azure_storage_key", r"[?&]sig=([A-Za-z0-9%+/=]{20,})", &[1], None),
        secret(
            "azure_storage_key",
            r#"(?i:--account-key|--storage-key|azure_storage_key|azure_storage_access_key|storage_account_key|account_key|accountkey)["']?(?:\s+|\s*[=:]\s*)["']?([A-Za-z0-9+/]{40,}={0,2})"#,
            &[1],
            Some(not_example),
        ),
        secret("github_token", r"\b(gh[pousr]_[A-Za-z0-9]{36,255})\b", &[1], None),
        secret("github_token", r"\b(github_pat_[A-Za-z0-9_]{22,255})", &[1], None),
        secret("gitlab_token", r"\b(gl(?:pat|dt|rt|ptt|cbt|imt|ft|oas|soat)-[A-Za-z0-9_-]{20,})", &[1], None),
        secret(
            "slack_webhook",
            r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/-]{20,})",
            &[1],
            Some(not_example),
        ),
        secret("slack_token", r"\b(xox[abposer]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})", &[1], Some(not_example)),
        secret("stripe_key", r"\b((?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})", &[1], None),
        secret(
            "openai_key",
            r"\b(sk-ant-[A-Za-z0-9_-]{20,}|sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|sk-[A-Za-z0-9]{32,})",
            &[1],
            Some(not_example),
        ),
        secret("sendgrid_key", r"\b(SG\.[\w-]{22}\.[\w-]{43})", &[1], None),
        secret("twilio_key", r"\b(SK[0-9a-fA-F]{32})\b", &[1], None),
        // A Twilio auth token: 32 hex digits in a text that mentions Twilio or holds an account SID.
        secret("twilio_key", r"\b([0-9a-f]{32})\b", &[1], Some(twilio_context)),
        secret("twilio_key", r"\bAC[0-9a-f]{32}:([0-9a-f]{32})\b", &[1], None),
        secret("npm_token", r"\b(npm_[A-Za-z0-9]{36})\b", &[1], None),
        secret("npm_token", r#"_authToken\s*=\s*["']?([^\s"']+)"#, &[1], Some(npm_auth_valid)),
        secret("jwt", r"\b(eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)", &[1], None),
        // Authorization headers: keep the scheme word, redact the credential.
        secret(
            "bearer_token",
            r#"(?i:\bbearer)\s+([A-Za-z0-9._~+/-]{12,}=*)(?:[\s"'`,;)\]}\\]|$)"#,
            &[1],
            Some(bearer_valid),
        ),
        secret(
            "bearer_token",
            r#"(?i:authorization)["']?\s*[:=,]?\s*["']?(?i:token|apikey|api-key|sso-key)\s+([A-Za-z0-9._~+/:-]{12,}=*)(?:[\s"'`,;)\]}\\]|$)"#,
            &[1],
            Some(bearer_valid),
        ),
        secret(
            "basic_auth",
            r#"(?i:\bbasic)\s+([A-Za-z0-9+/]{8,}={0,2})(?:[\s"'`,;)\]}\\]|$)"#,
            &[1],
            Some(basic_valid),
        ),
        // user:PASSWORD@host: only the password goes.
        secret(
            "url_password",
            r#"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@'"<>]*:([^\s@/'"<>]+)@[A-Za-z0-9.\[_-]"#,
            &[1],
            Some(url_password_valid),
        ),
        secret(
            "basic_auth",
            r#"(?:^|\s)(?:-u|--user|--basic-auth|--auth)[\s=]+["']?[^\s:"'$]+:([^\s"'@]+)"#,
            &[1],
            Some(cli_password_valid),
        ),
        // SQL and CLI forms of a password.
        secret(
            "password_assignment",
            r"(?i:\b(?:identified\s+by|with\s+(?:encrypted\s+)?password|\bpassword))\s+'((?:[^'\n]|'')+)'",
            &[1],
            Some(quoted_password_valid),
        ),
        secret(
            "password_assignment",
            r#"(?:^|\s)--?(?i:password|passwd|pass)(?:\s+|=)["']?([^\s"'-][^\s"']*)"#,
            &[1],
            Some(cli_password_valid),
        ),
        secret(
            "password_assignment",
            r#"\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n]*?\s-p["']?([^\s"'-][^\s"']*)"#,
            &[1],
            Some(cli_password_valid),
        ),
        secret(
            "password_assignment",
            r#"\b(?:sshpass\s+-p|docker\s+login\b[^\n]*?\s-p|redis-cli\b[^\n]*?\s-a|htpasswd\s+-b\S*\s+\S+\s+\S+)\s+["']?([^\s"']+)"#,
            &[1],
            Some(cli_password_valid),
        ),
        // Credentials passed as (user, password) string arguments.
        secret(
            "password_assignment",
            r#"(?i:\bauth\s*=\s*\(|[\w.]*(?:basicauth|basic_auth|credentials?|credential|login|logon|signin|sign_in|authenticate|useridentity|passwordauthentication)\s*\()\s*["'][^"'\n]{1,80}["']\s*,\s*["']([^"'\n]{3,128})["']"#,
            &[1],
            Some(quoted_password_valid),
        ),
        secret(
            "password_assignment",
            r#"(?:\.|\b)(?i:set_?password|with_?password|password|passwd)\s*\(\s*["']([^"'\n]{3,128})["']\s*[,)]"#,
            &[1],
            Some(quoted_password_valid),
        ),
        // XML: <password>...</password>, <add key="DbPassword" value="..."/>.
        secret(
            "password_assignment",
            r#"<((?i:[\w.:-]*(?:password|passwd|pwd)[\w.:-]*))>([^<\s]{3,200})</"#,
            &[2],
            Some(xml_password_valid),
        ),
        secret(
            "api_key_assignment",
            r#"<((?i:[\w.:-]*(?:api[_-]?key|apikey|secret|token|access[_-]?key)[\w.:-]*))>([^<\s]{8,300})</"#,
            &[2],
            Some(xml_api_key_valid),
        ),
        secret(
            "password_assignment",
            r#"(?i:key|name)\s*=\s*["'][\w.:-]*(?i:password|passwd|pwd)[\w.:-]*["']\s+(?i:value)\s*=\s*["']([^"'\n]{3,200})["']"#,
            &[1],
            Some(quoted_password_valid),
        ),
        secret(
            "api_key_assignment",
            r#"(?i:key|name)\s*=\s*["'][\w.:-]*(?i:api[_-]?key|apikey|secret|token)[\w.:-]*["']\s+(?i:value)\s*=\s*["']([^"'\n]{8,300})["']"#,
            &[1],
            Some(bearer_valid),
        ),
        // Go MySQL DSN without a scheme: user:password@tcp(host)/db.
        secret("url_password", r"\b[\w.-]+:([^\s@/:'\x22]{3,})@(?:tcp|unix)\(", &[1], Some(url_password_valid)),
        // Prose: "the password is hunter2!".
        secret(
            "password_assignment",
            r#"(?i:\b(?:password|passwd|passphrase)\s+(?:is|was|=)\s+)["'`]?([^\s"'`]{4,128}?)["'`]?(?:[.,;)]?(?:\s|$))"#,
            &[1],
            Some(prose_password_valid),
        ),
        // Generic assignments last.
        secret("password_assignment", &assignment(PASSWORD_KEY), &[3, 4, 5], Some(password_valid)),
        secret("api_key_assignment", &assignment(API_KEY), &[3, 4, 5], Some(api_key_valid)),
        // `("X-Api-Key", "...")`: a header or map entry as two quoted arguments.
        secret("password_assignment", &quoted_pair(PASSWORD_KEY), &[3, 4], Some(password_valid)),
        secret("api_key_assignment", &quoted_pair(API_KEY), &[3, 4], Some(api_key_valid)),
    ]
});

/// Replaces every secret in `text` with `[REDACTED:<kind>]`. Text without secrets comes back byte for byte.
pub fn redact(text: &str) -> Redacted {
    let mut current = text.to_string();
    let mut kinds = Vec::new();
    for rule in RULES.iter() {
        if let Some(next) = apply(rule, &current, &mut kinds) {
            current = next;
        }
    }
    Redacted { text: current, kinds }
}

/// One rule over the text; `None` when it replaced nothing.
fn apply(rule: &SecretRule, text: &str, kinds: &mut Vec<&'static str>) -> Option<String> {
    let placeholders: Vec<Range<usize>> = PLACEHOLDER.find_iter(text).map(|m| m.range()).collect();
    let mut out = String::new();
    let mut last = 0;
    for caps in rule.re.captures_iter(text) {
        let Some(m) = rule.groups.iter().find_map(|&g| caps.get(g)) else { continue };
        if m.start() < last || m.is_empty() || placeholders.iter().any(|p| p.start < m.end() && m.start() < p.end) {
            continue;
        }
        if is_mask(m.as_str()) || documented_example(m.as_str()) || rule.valid.is_some_and(|valid| !valid(&caps, text))
        {
            continue;
        }
        out.push_str(&text[last..m.start()]);
        out.push_str("[REDACTED:");
        out.push_str(rule.kind);
        out.push(']');
        last = m.end();
        kinds.push(rule.kind);
    }
    if last == 0 {
        return None;
    }
    out.push_str(&text[last..]);
    Some(out)
}

// ---------------------------------------------------------------------------------------------------------
// Value checks
// ---------------------------------------------------------------------------------------------------------

/// A masked value: `sk_test_XXXXXXXXXXXXXXXX`, `ghp_************`, `0000000000000000`.
fn is_mask(v: &str) -> bool {
    let b = v.as_bytes();
    b.windows(6).any(|w| w.iter().all(|&c| c == w[0]) && matches!(w[0], b'x' | b'X' | b'*' | b'#' | b'.' | b'0'))
        || v.contains('•')
}

/// Credentials published in vendor documentation as examples: AWS's `...EXAMPLE` keys, the jwt.io sample,
/// Stripe's docs keys, the Azure storage emulator's well-known account key, GitHub's and Slack's docs tokens.
fn documented_example(v: &str) -> bool {
    const KNOWN: &[&str] = &[
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        "4eC39HqLyjWDarjtT1zdp7dc",
        "TYooMQauvdEDq54NiTphI7jx",
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy",
    ];
    v.to_ascii_lowercase().contains("example") || KNOWN.iter().any(|k| v.contains(k))
}

fn group<'t>(caps: &Captures<'t>, groups: &[usize]) -> &'t str {
    groups.iter().find_map(|&g| caps.get(g)).map_or("", |m| m.as_str())
}

fn service_account_context(_caps: &Captures, text: &str) -> bool {
    text.contains("service_account") || text.contains("\"private_key_id\"") || text.contains("gserviceaccount.com")
}

/// Documented example credentials (AWS's `...EXAMPLE`, `...EXAMPLEKEY`) are not secrets.
fn not_example(caps: &Captures, _text: &str) -> bool {
    let v = group(caps, &[1, 0]);
    !v.to_ascii_uppercase().contains("EXAMPLE")
}

fn aws_secret_valid(caps: &Captures, text: &str) -> bool {
    let v = group(caps, &[1]);
    let classes = [v.bytes().any(|b| b.is_ascii_uppercase()), v.bytes().any(|b| b.is_ascii_lowercase())];
    not_example(caps, text) && classes.iter().all(|&c| c) && v.bytes().any(|b| b.is_ascii_digit())
}

fn encoded_private_key(caps: &Captures, _text: &str) -> bool {
    use base64::Engine;
    let blob = group(caps, &[1]);
    let body = blob.trim_end_matches('=');
    let body = &body[..body.len() - body.len() % 4];
    super::screen::B64_STANDARD.decode(body).is_ok_and(|b| String::from_utf8_lossy(&b).contains("PRIVATE KEY"))
}

/// `Basic <base64 of user:password>`.
fn basic_valid(caps: &Captures, _text: &str) -> bool {
    use base64::Engine;
    let blob = group(caps, &[1]);
    let decoded =
        super::screen::B64_STANDARD.decode(blob.trim_end_matches('=')).ok().and_then(|b| String::from_utf8(b).ok());
    decoded.is_some_and(|d| d.split_once(':').is_some_and(|(_, p)| !p.is_empty() && !is_placeholder(p)))
}

fn twilio_context(_caps: &Captures, text: &str) -> bool {
    static SID: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i)twilio|\bAC[0-9a-f]{32}\b").expect("sid"));
    SID.is_match(text)
}

fn npm_auth_valid(caps: &Captures, _text: &str) -> bool {
    !is_placeholder(group(caps, &[1]))
}

fn bearer_valid(caps: &Captures, _text: &str) -> bool {
    let v = group(caps, &[1]);
    !is_placeholder(v) && looks_random(v)
}

fn url_password_valid(caps: &Captures, _text: &str) -> bool {
    let v = group(caps, &[1]);
    !is_placeholder(v) && !v.starts_with(':')
}

fn quoted_password_valid(caps: &Captures, _text: &str) -> bool {
    let v = group(caps, &[1]);
    !is_placeholder(v) && !v.contains(char::is_whitespace)
}

fn xml_password_valid(caps: &Captures, _text: &str) -> bool {
    let v = group(caps, &[2]);
    !NON_SECRET_KEY.is_match(group(caps, &[1])) && !is_placeholder(v) && !is_code_reference(v)
}

fn xml_api_key_valid(caps: &Captures, _text: &str) -> bool {
    let v = group(caps, &[2]);
    !NON_SECRET_KEY.is_match(group(caps, &[1])) && !is_placeholder(v) && looks_random(v)
}

/// A password named in prose must look like one: a digit or a symbol, not a plain word.
fn prose_password_valid(caps: &Captures, _text: &str) -> bool {
    let v = group(caps, &[1]);
    !is_placeholder(v) && !is_code_reference(v) && v.chars().any(|c| !c.is_ascii_alphabetic()) && !is_slug(v)
}

fn cli_password_valid(caps: &Captures, _text: &str) -> bool {
    let v = group(caps, &[1]);
    !is_placeholder(v) && !is_code_reference(v) && v.len() >= 4
}

/// Key suffixes that name something about a password, not the password: `password_hash`, `password_min_length`.
static NON_SECRET_KEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:hash|hashed|digest|sha|sha1|sha256|sha512|md5|checksum|fingerprint|length|len|size|min|max|policy|reset|field|file|path|dir|url|uri|prompt|label|regex|pattern|rules?|hint|expiry|expires|expires_at|expiration|lifetime|age|strength|encoder|hasher|validator|manager|type|kind|enabled|required|count|attempts|timeout|ttl|history|salt|form|column|col|widget|name|env|var|header|param|prefix|suffix|format|version|limit|endpoint|input|mode|changed|changed_at|updated_at|created_at|at|set|less|id|ids|ref|refs|provider|method|scheme|strategy|backend|store|storage|source|location|algorithm|alg|issuer|audience|scopes?|role|level|class|module|handler|callback|service|server|host|port|length_min|rotation|generator|factory|filter|interceptor|parser|serializer|usage|usages|reader|writer|loader|helper|util|utils|config|settings|options|spec|schema|model|table|cache|queue|store_path|template)$")
        .expect("non-secret keys")
});

fn password_valid(caps: &Captures, text: &str) -> bool {
    let key = group(caps, &[1]);
    if NON_SECRET_KEY.is_match(key) {
        return false;
    }
    let value = group(caps, &[3, 4, 5]);
    if is_placeholder(value) || value.contains(char::is_whitespace) || value.chars().count() < 3 {
        return false;
    }
    if caps.get(5).is_some() {
        // A bare value may be code: `password=password`, `password: str`, `password = get_password()`.
        if is_code_reference(value) || followed_by_call(caps, text) {
            return false;
        }
        if value.chars().all(|c| c.is_ascii_alphabetic() || c == '_') && !env_style(caps, text) {
            return false;
        }
        if value.chars().all(|c| c.is_ascii_digit()) && value.len() < 6 {
            return false;
        }
    }
    true
}

fn api_key_valid(caps: &Captures, text: &str) -> bool {
    let key = group(caps, &[1]);
    if NON_SECRET_KEY.is_match(key) || key.to_ascii_lowercase().ends_with("tokens") {
        return false;
    }
    let value = group(caps, &[3, 4, 5]);
    if is_placeholder(value) || value.contains(char::is_whitespace) || value.chars().count() < 8 {
        return false;
    }
    if caps.get(5).is_some() && (is_code_reference(value) || followed_by_call(caps, text) || identifier_like(value)) {
        return false;
    }
    looks_random(value)
}

/// `KEY=value` at a line start with an upper-case key: a .env file or a shell assignment, where a bare word is
/// a literal.
fn env_style(caps: &Captures, text: &str) -> bool {
    let (Some(key), Some(sep)) = (caps.get(1), caps.get(2)) else { return false };
    let line_start = text[..key.start()].rfind('\n').map_or(0, |i| i + 1);
    let lead = text[line_start..key.start()].trim_start();
    let lead_ok = lead.is_empty() || lead == "export " || lead == "export" || lead.ends_with(' ');
    let upper = key.as_str().chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    let yaml = sep.as_str().trim() == ":" && text[line_start..key.start()].trim().is_empty();
    (upper && sep.as_str() == "=" && lead_ok) || yaml
}

fn followed_by_call(caps: &Captures, text: &str) -> bool {
    caps.get(5).is_some_and(|m| text[m.end()..].starts_with(['(', '[']))
}

/// A bare value that is code, not a literal: a call, an index, a dotted path, a variable, a type.
fn is_code_reference(v: &str) -> bool {
    static CODE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(?:[A-Za-z_$][\w$]*(?:(?:\.|::|->)[A-Za-z_$][\w$]*)+\(?|[A-Za-z_$][\w$.]*[(\[].*|(?:str|string|String|bytes|int|bool|SecretStr|Optional|None|Any|text|varchar|char|Text|&str|Option|undefined|null|nil|true|false)\??)$")
            .expect("code reference")
    });
    CODE.is_match(v)
}

/// Placeholders, masks, examples and environment lookups.
fn is_placeholder(v: &str) -> bool {
    static SHAPE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)^(?:<[^>]*>?|\[[^\]]*\]|\{[^}]*\}?|\$.*|%.*%?|!\w.*|:\w+|@\w+|\?|guest|anonymous|.*\$\{.*|.*\{\{.*|.*\$\(.*|[*x.•#?_-]{3,}|.*(?:redacted|changeme|change_me|change-me|placeholder|your[_-]|_here\b|example|dummy|xxxx|\*\*\*).*|your.*|(?:password|passwd|pass|pwd|secret|token|test|testing|sample|none|null|nil|true|false|undefined|todo|tbd|fixme|default|admin|root|user|username|empty|blank|n/a|api_key|apikey|key|value|string|str|postgres|mysql|mariadb|redis|rabbitmq|elastic|minioadmin|sa)|.*(?:os\.environ|getenv|process\.env|environ\[|env\[|env\.fetch|system\.getenv|getenvironmentvariable|secrets\.|vault:|ssm:|!ref\b|@value\(|env\().*)$")
            .expect("placeholder shape")
    });
    let t = v.trim();
    t.is_empty() || SHAPE.is_match(t)
}

/// A value that looks machine-generated: long enough, several character classes or high entropy, and not a
/// slug of words (`google-oauth2`, `jenkins-github-creds-01`).
fn looks_random(v: &str) -> bool {
    let n = v.chars().count();
    if n < 8 || is_slug(v) {
        return false;
    }
    let lower = v.chars().filter(|c| c.is_ascii_lowercase()).count();
    let upper = v.chars().filter(|c| c.is_ascii_uppercase()).count();
    let digit = v.chars().filter(|c| c.is_ascii_digit()).count();
    let classes = [lower > 0, upper > 0, digit > 0].iter().filter(|&&c| c).count();
    let mixed = (digit > 0 && classes >= 2) || (upper >= 2 && lower >= 2 && n >= 12);
    mixed || (n >= 16 && entropy(v) >= 3.5)
}

/// Words joined by separators, each a word with at most a short number: `api-gateway-v2`, `creds_01`.
fn is_slug(v: &str) -> bool {
    static SEGMENT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^(?:[A-Za-z][a-z]+\d{0,3}|[A-Z]{2,5}\d{0,3}|\d{1,4}|v\d{1,3})$").expect("slug"));
    let parts: Vec<&str> = v.split(['-', '_', '.', '/', ':']).collect();
    parts.len() >= 2 && parts.iter().all(|p| SEGMENT.is_match(p))
}

/// An identifier made mostly of lowercase word runs: `OAuth2PasswordBearer`, `TokenRefreshInterceptor`.
fn identifier_like(v: &str) -> bool {
    if !v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return false;
    }
    let mut covered = 0;
    let mut run = 0;
    for c in v.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_lowercase() {
            run += 1;
        } else {
            if run >= 3 {
                covered += run;
            }
            run = 0;
        }
    }
    covered * 2 >= v.len()
}

/// Shannon entropy in bits per character.
fn entropy(v: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    let mut n = 0usize;
    for c in v.chars() {
        *counts.entry(c).or_insert(0usize) += 1;
        n += 1;
    }
    counts
        .values()
        .map(|&k| {
            let p = k as f64 / n as f64;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn assert_redacts(text: &str, secret: &str, kind: &str) {
        let r = redact(text);
        assert!(!r.text.contains(secret), "{secret:?} survived in {:?}", r.text);
        assert!(r.kinds.contains(&kind), "expected kind {kind}, got {:?} for {text:?} -> {:?}", r.kinds, r.text);
        assert!(r.text.contains(&format!("[REDACTED:{kind}]")));
        assert_eq!(redact(&r.text).text, r.text, "not idempotent for {text:?}");
    }

    #[track_caller]
    fn assert_kept(text: &str) {
        let r = redact(text);
        assert_eq!(r.text, text, "changed: kinds {:?}", r.kinds);
        assert!(r.kinds.is_empty());
    }

    #[test]
    fn cloud_keys() {
        assert_redacts("aws_access_key_id = AKIAQ3EGUOTGBYEXAMPX", "AKIAQ3EGUOTGBYEXAMPX", "aws_access_key");
        assert_redacts(
            "aws_secret_access_key = kR8s9XUtnFEMI/K7MDENG/bPxRfiCY1234567890",
            "kR8s9XUtnFEMI/K7MDENG/bPxRfiCY1234567890",
            "aws_secret_key",
        );
        assert_kept("aws_access_key_id = AKIAIOSFODNN7EXAMPLE");
        assert_kept("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
        assert_redacts(
            "key=AIzaSyD-1234567890abcdefghijklmnopqrstu",
            "AIzaSyD-1234567890abcdefghijklmnopqrstu",
            "gcp_api_key",
        );
        assert_redacts(
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=q2W3e4R5t6Y7u8I9o0P1a2S3d4F5g6H7j8K9l0==;EndpointSuffix=core.windows.net",
            "q2W3e4R5t6Y7u8I9o0P1a2S3d4F5g6H7j8K9l0==",
            "azure_storage_key",
        );
        assert_redacts(
            "https://acct.blob.core.windows.net/c/f?sv=2022-11-02&sig=AbCdEf123456%2BGhIjKl789%3D",
            "AbCdEf123456%2BGhIjKl789%3D",
            "azure_storage_key",
        );
    }

    #[test]
    fn private_keys() {
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7v\nabc123\n-----END RSA PRIVATE KEY-----";
        assert_redacts(&format!("key:\n{pem}\nend"), "MIIEowIBAAKCAQEA7v", "private_key_pem");
        let json = r#"{"type": "service_account", "private_key_id": "0123456789abcdef0123456789abcdef01234567", "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"}"#;
        let r = redact(json);
        assert!(!r.text.contains("MIIEvQIBADAN"), "{}", r.text);
        assert!(!r.text.contains("0123456789abcdef0123456789abcdef01234567"));
        assert!(r.kinds.iter().all(|k| *k == "gcp_service_account"), "{:?}", r.kinds);
        assert_eq!(redact(&r.text).text, r.text);
    }

    #[test]
    fn vendor_tokens() {
        let gh = format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
        assert_redacts(&format!("token {gh} leaked"), &gh, "github_token");
        let pat = format!("github_pat_{}", "11ABCDEFG0123456789_abcdefghijKLMNOP");
        assert_redacts(&pat, &pat, "github_token");
        assert_redacts("glpat-abcDEF123456ghiJKL78", "glpat-abcDEF123456ghiJKL78", "gitlab_token");
        assert_redacts("xoxb-123456789012-1234567890123-AbCdEfGhIjKl", "xoxb-123456789012", "slack_token");
        assert_redacts(
            "https://hooks.slack.com/services/T01ABCDEF/B02GHIJKL/abcdEFGHijklMNOPqrstUVWX",
            "abcdEFGHijklMNOPqrstUVWX",
            "slack_webhook",
        );
        assert_redacts("sk_live_51HxYzAbCdEfGhIjKlMnOp", "sk_live_51HxYzAbCdEfGhIjKlMnOp", "stripe_key");
        assert_kept("Use pk_live_51HxYzAbCdEfGhIjKlMnOp in the browser.");
        let oa = format!("sk-{}", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8");
        assert_redacts(&format!("OPENAI={oa}"), &oa, "openai_key");
        assert_redacts("sk-proj-Ab12Cd34Ef56Gh78Ij90KlMnOpQr", "sk-proj-Ab12Cd34Ef56Gh78Ij90KlMnOpQr", "openai_key");
        assert_redacts("sk-ant-api03-Ab12Cd34Ef56Gh78Ij90Kl", "sk-ant-api03-Ab12Cd34Ef56Gh78Ij90Kl", "openai_key");
        let sg = format!("SG.{}.{}", "abcdefghij0123456789AB", "abcdefghij0123456789ABCDEFGHIJ0123456789abc");
        assert_redacts(&sg, &sg, "sendgrid_key");
        assert_redacts("SK0123456789abcdef0123456789abcdef", "SK0123456789abcdef0123456789abcdef", "twilio_key");
        assert_redacts(
            "TWILIO_AUTH_TOKEN=0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef",
            "twilio_key",
        );
        assert_redacts("npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm_abcdefghij", "npm_token");
        assert_redacts("//registry.npmjs.org/:_authToken=abcd-1234-efgh-5678", "abcd-1234-efgh-5678", "npm_token");
        assert_kept("//registry.npmjs.org/:_authToken=${NPM_TOKEN}");
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        assert_redacts(&format!("cookie={jwt}"), jwt, "jwt");
    }

    #[test]
    fn bearer_and_url_passwords() {
        let r = redact("curl -H \"Authorization: Bearer abcDEF123456ghiJKL789\" https://api.example.com");
        assert!(r.text.contains("Bearer [REDACTED:bearer_token]"), "{}", r.text);
        let r = redact("postgres://app:s3cr3t-P4ss@db.internal:5432/app");
        assert_eq!(r.text, "postgres://app:[REDACTED:url_password]@db.internal:5432/app");
        assert_kept("postgres://app:${DB_PASSWORD}@db.internal:5432/app");
        assert_kept("See https://user@example.com/path and https://example.com:8443/x");
        assert_kept("Send Authorization: Bearer <token> on every call.");
    }

    #[test]
    fn password_assignments() {
        assert_redacts("password = \"hunter2\"", "hunter2", "password_assignment");
        assert_redacts("DB_PASSWORD=supersecret", "supersecret", "password_assignment");
        assert_redacts("db:\n  password: Tr0ub4dor&3\n", "Tr0ub4dor&3", "password_assignment");
        assert_redacts("{\"password\": \"Pa55w0rd!\"}", "Pa55w0rd!", "password_assignment");
        assert_redacts("CREATE ROLE app LOGIN PASSWORD 'x9!kQ2z'", "x9!kQ2z", "password_assignment");
        assert_redacts("mysqladmin --password=Qw3rty99 status", "Qw3rty99", "password_assignment");
        for t in [
            "password = \"\"",
            "password = \"<your password>\"",
            "password: ${DB_PASSWORD}",
            "password: \"{{ vault_db_password }}\"",
            "PASSWORD=$PGPASSWORD",
            "password = \"***\"",
            "password = \"changeme\"",
            "password = YOUR_PASSWORD",
            "password = os.environ[\"DB_PASSWORD\"]",
            "password = os.getenv(\"DB_PASSWORD\")",
            "const password = process.env.DB_PASSWORD;",
            "connect(password=password)",
            "password = get_password()",
            "def login(user: str, password: str):",
            "password_hash = bcrypt.hashpw(password, salt)",
            "self.password = password",
            "The password: it must be rotated.",
        ] {
            assert_kept(t);
        }
    }

    #[test]
    fn api_key_assignments() {
        assert_redacts(
            "api_key = \"a8f5f167f44f4964e6c998dee827110c\"",
            "a8f5f167f44f4964e6c998dee827110c",
            "api_key_assignment",
        );
        assert_redacts("X-Api-Key: 9fQ2xL7mK4pR8sT1", "9fQ2xL7mK4pR8sT1", "api_key_assignment");
        assert_redacts("SECRET_KEY = 'django-insecure-7h#kq9z!2m'", "django-insecure-7h#kq9z!2m", "api_key_assignment");
        for t in [
            "api_key = os.environ[\"API_KEY\"]",
            "const key = process.env.STRIPE_SECRET_KEY;",
            "token: ${{ secrets.NPM_TOKEN }}",
            "api_key = \"<your key>\"",
            "client_secret = settings.CLIENT_SECRET",
            "token = request.headers[\"Authorization\"]",
            "max_tokens = 1024",
            "csrf_token = generate_csrf_token()",
            "secret: rotate them monthly",
            "token_url = \"https://auth.example.com/token\"",
        ] {
            assert_kept(t);
        }
    }

    #[test]
    fn ordinary_code_survives() {
        for t in [
            "SELECT * FROM users WHERE id = $1",
            "id 123e4567-e89b-12d3-a456-426614174000 is the request id",
            "Fixed in commit 9fceb02d0ae598e95dc970b74767f19372d61af8.",
            "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 matches",
            "kubectl logs api-7f9c8d6b5-x2x4q",
            "The PNG header in base64 is iVBORw0KGgo=.",
            "Use ${{ secrets.NPM_TOKEN }} in the workflow.",
            "See https://docs.github.com/en/rest?apiVersion=2022-11-28",
        ] {
            assert_kept(t);
        }
    }

    #[test]
    fn more_password_forms() {
        for (t, secret) in [
            ("mysql -u root -pS3cr3t!x -h db", "S3cr3t!x"),
            ("sshpass -p 'Tr0ub4dor&3' ssh deploy@host", "Tr0ub4dor&3"),
            ("requests.get(url, auth=(\"svc\", \"Kx8#pq2Lm!\"))", "Kx8#pq2Lm!"),
            ("new NetworkCredential(\"svc\", \"Kx8#pq2Lm!\")", "Kx8#pq2Lm!"),
            ("builder.setPassword(\"Kx8#pq2Lm!\")", "Kx8#pq2Lm!"),
            ("<password>Kx8#pq2Lm!</password>", "Kx8#pq2Lm!"),
            ("<add key=\"DbPassword\" value=\"Kx8#pq2Lm!\" />", "Kx8#pq2Lm!"),
            ("The password is Kx8#pq2Lm! for the staging box.", "Kx8#pq2Lm!"),
            ("docker login -u ci -p Kx8pq2LmZ9 registry.example.com", "Kx8pq2LmZ9"),
        ] {
            assert_redacts(t, secret, "password_assignment");
        }
        assert_redacts("dsn := \"app:Kx8pq2Lm@tcp(127.0.0.1:3306)/shop\"", "Kx8pq2Lm", "url_password");
        assert_redacts("curl -u ci-bot:Kx8pq2LmZ9 https://api.example.com", "Kx8pq2LmZ9", "basic_auth");
        assert_redacts("proxy_set_header Authorization \"Basic dXNlcjpzM2NyM3Qh\";", "dXNlcjpzM2NyM3Qh", "basic_auth");
    }

    #[test]
    fn encoded_and_contextual_keys() {
        use base64::Engine;
        let pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n";
        let encoded = base64::engine::general_purpose::STANDARD.encode(pem);
        assert_redacts(&format!("data:\n  key.pem: {encoded}"), &encoded, "private_key_pem");
        assert_redacts(
            "az storage blob upload --account-key q2W3e4R5t6Y7u8I9o0P1a2S3d4F5g6H7j8K9l0Zx== -c c",
            "q2W3e4R5t6Y7u8I9o0P1a2S3d4F5g6H7j8K9l0Zx==",
            "azure_storage_key",
        );
        let twilio = "from twilio.rest import Client\nc = Client(\"AC0123456789abcdef0123456789abcdef\", \"fedcba9876543210fedcba9876543210\")";
        assert_redacts(twilio, "fedcba9876543210fedcba9876543210", "twilio_key");
        assert_redacts(
            "req.Header.Set(\"X-Api-Key\", \"519e5d05b5b132e520e34586e3144cb5\")",
            "519e5d05b5b132e520e34586e3144cb5",
            "api_key_assignment",
        );
    }

    #[test]
    fn more_clean_text_survives() {
        for t in [
            "Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.<payload>.<signature>",
            "POSTGRES_PASSWORD: postgres",
            "password: !vault |",
            "auth: OAuth2PasswordBearer = Depends(oauth2_scheme)",
            "credentialsId: 'jenkins-github-creds-01'",
            "auth_provider: google-oauth2",
            "WHERE password = :password",
            "STRIPE_KEY=sk_test_XXXXXXXXXXXXXXXXXXXXXXXX",
            "-----BEGIN PRIVATE KEY----- headers must never be committed.",
            "password = keyring.get_password(\"pg_feedback\", username)",
            "The password is stored with bcrypt.",
            "ftp://anonymous:guest@ftp.example.com/pub",
            "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
            "max_tokens: 4096",
            "secret: ${{ secrets.DEPLOY_KEY }}",
        ] {
            assert_kept(t);
        }
    }

    #[test]
    fn idempotent_and_counted() {
        let t = "a=AKIAQ3EGUOTGBYEXAMPX b=\"Pa55w0rd!\" password: hunter22 postgres://u:p4ss@h/db";
        let r = redact(t);
        assert_eq!(r.kinds.len(), 3, "{:?} {}", r.kinds, r.text);
        let again = redact(&r.text);
        assert_eq!(again.text, r.text);
        assert!(again.kinds.is_empty());
    }
}
