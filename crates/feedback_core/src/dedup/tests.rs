use super::*;

const SHIPPED: &str = include_str!("../../../../data/dedup/compare.json");

fn shipped() -> Calibrated {
    serde_json::from_str(SHIPPED).expect("data/dedup/compare.json")
}

/// The verdict with the shipped model, the residual cosine taken as the pair's (an upper bound for an edit).
fn verdict(a: &str, b: &str, sim: f64) -> Comparison {
    compare(a, b, sim, sim, &shipped())
}

#[test]
fn the_shipped_model_fits_this_build() {
    assert!(shipped().fits_this_build());
    assert!(shipped().merge.threshold > 0.0 && shipped().merge.threshold < 1.0);
}

#[test]
fn fit_keeps_false_merges_within_the_budget() {
    // One feature that separates nothing: the threshold must still let at most the budget of negatives through.
    let rows: Vec<Vec<f64>> = (0..200)
        .map(|i| {
            let mut r = vec![0.0; FEATURES.len()];
            r[0] = 0.8 + (i % 20) as f64 / 100.0;
            r[1] = (i % 7) as f64 / 7.0;
            r
        })
        .collect();
    let labels: Vec<bool> = (0..200).map(|i| i % 3 == 0).collect();
    let m = fit(&rows, &labels, 0.75, 0.02);
    let p = m.merge.predict(&rows);
    let false_merges = p.iter().zip(&labels).filter(|(p, d)| !**d && **p >= m.merge.threshold).count();
    assert!(false_merges as f64 <= 0.02 * labels.iter().filter(|d| !**d).count() as f64, "{false_merges}");
}

#[test]
fn residuals_are_what_differs() {
    let (a, b) = residuals("Prefer tabs for indentation.", "Prefer spaces for indentation.");
    assert_eq!((a.as_str(), b.as_str()), ("tabs", "spaces"));
    assert_eq!(residuals("Same text.", "Same text."), ("-".to_string(), "-".to_string()));
}

#[test]
fn contractions_open_into_not() {
    let t = tokenize("Don't log the token; it can't leak.");
    let norms: Vec<&str> = t.iter().map(|t| t.norm.as_str()).collect();
    assert!(norms.contains(&"not"), "{norms:?}");
    assert_eq!(norms.iter().filter(|n| **n == "not").count(), 2);
}

#[test]
fn classes() {
    let t = tokenize("Use the v2 endpoint of knex.raw with a 30s timeout in LaunchDarkly, per `max_pool`.");
    let class = |w: &str| t.iter().find(|t| t.raw == w).map(|t| t.class);
    assert_eq!(class("v2"), Some(Class::Version));
    assert_eq!(class("30s"), Some(Class::Number));
    assert_eq!(class("knex.raw"), Some(Class::Identifier));
    assert_eq!(class("LaunchDarkly"), Some(Class::Identifier));
    assert_eq!(class("max_pool"), Some(Class::Identifier));
    assert_eq!(class("endpoint"), Some(Class::Word));
    assert_eq!(class("the"), Some(Class::Stop));
}

#[test]
fn a_negated_lesson_is_a_revision() {
    let c = verdict(
        "Numeric-looking input concatenated into SQL is still injectable; bind it as a parameter.",
        "Numeric-looking input concatenated into SQL is not injectable once it is cast to int; no need to bind it.",
        0.947,
    );
    assert_eq!(c.verdict, Verdict::Revision, "{c:?}");
    assert_eq!(c.kind, Some(Change::Negation));
}

#[test]
fn swapped_items_are_a_revision() {
    let c = verdict(
        "Prefer tabs over spaces for indentation in Makefiles.",
        "Prefer spaces over tabs for indentation in Makefiles.",
        0.994,
    );
    assert_eq!(c.verdict, Verdict::Revision, "{c:?}");
    assert_eq!(c.kind, Some(Change::SwappedComparison));
}

#[test]
fn changed_numbers_versions_and_bounds_are_revisions() {
    let n = verdict(
        "Rotate leaked CI tokens within 24 hours of detection.",
        "Rotate leaked CI tokens within 1 hour of detection.",
        0.98,
    );
    assert_eq!(n.kind, Some(Change::Number), "{n:?}");
    let v = verdict(
        "Use the v2 payments endpoint; v1 is deprecated.",
        "Use the v1 payments endpoint; v2 is deprecated.",
        0.994,
    );
    assert_eq!(v.verdict, Verdict::Revision, "{v:?}");
    let b = verdict(
        "Set the HTTP client timeout to at least 30 seconds.",
        "Set the HTTP client timeout to at most 30 seconds.",
        0.97,
    );
    assert_eq!(b.kind, Some(Change::Bound), "{b:?}");
}

#[test]
fn no_longer_and_scope_are_revisions() {
    let n = verdict(
        "Wrap every db.query call in our sanitizeSql() helper before executing it.",
        "No longer wrap db.query calls in our sanitizeSql() helper before executing them; bind parameters.",
        0.9,
    );
    assert_eq!(n.kind, Some(Change::NoLonger), "{n:?}");
    let s = verdict(
        "Mark slow tests with @slow and exclude them from every pipeline run.",
        "Mark slow tests with @slow and exclude them only from pull-request pipeline runs.",
        0.95,
    );
    assert_eq!(s.kind, Some(Change::Scope), "{s:?}");
}

#[test]
fn a_replaced_tool_is_a_revision() {
    let c = verdict(
        "Read feature flags from LaunchDarkly at startup.",
        "Read feature flags from the config service at startup, not from LaunchDarkly.",
        0.948,
    );
    assert_eq!(c.verdict, Verdict::Revision, "{c:?}");
    let i = verdict(
        "Cancel in-flight requests on unmount with an axios CancelToken.",
        "Cancel in-flight requests on unmount with an AbortController signal.",
        0.95,
    );
    assert_eq!(i.verdict, Verdict::Revision, "{i:?}");
    assert_eq!(i.kind, Some(Change::Identifier));
}

#[test]
fn a_rewording_is_a_duplicate() {
    let c = verdict(
        "Numeric ids glued into SQL strings are injectable; bind them as parameters.",
        "Integer ids concatenated into SQL queries are still injectable; use a bound parameter.",
        0.907,
    );
    assert_ne!(c.verdict, Verdict::Revision, "{c:?}");
    assert!(c.differences.is_empty(), "{c:?}");
    let same = verdict("Close the file.", "Close the file.", 1.0);
    assert_eq!(same.verdict, Verdict::Duplicate);
}

#[test]
fn far_apart_is_distinct() {
    let c = verdict("Close the file.", "Bind SQL parameters.", 0.5);
    assert_eq!(c.verdict, Verdict::Distinct);
}

#[test]
fn a_light_edit_merges_but_a_replaced_name_does_not() {
    let replaced = verdict(
        "Use git filter-branch to scrub leaked keys from history.",
        "Use git filter-repo to scrub leaked keys from history.",
        0.98,
    );
    assert_ne!(replaced.verdict, Verdict::Duplicate, "{replaced:?}");
    // An added word, a synonym, a hyphen: duplicates; an added name: a revision.
    let cases = [
        (
            "Close the file handle in a finally block.",
            "Close the file handle in a finally block, indeed.",
            0.99,
            Verdict::Duplicate,
        ),
        (
            "Shared caches must be keyed by tenant id to avoid leaking data between customers.",
            "Shared caches must be keyed by tenant id to avoid leaking data between clients.",
            0.98,
            Verdict::Duplicate,
        ),
        (
            "Numeric-looking input concatenated into SQL is still injectable; bind it as a parameter.",
            "Numeric looking input concatenated into SQL is still injectable: bind it as a parameter.",
            0.99,
            Verdict::Duplicate,
        ),
        (
            "Use SELECT ... FOR UPDATE to claim jobs from a queue table.",
            "Use SELECT ... FOR UPDATE SKIP LOCKED to claim jobs from a queue table.",
            0.953,
            Verdict::Revision,
        ),
    ];
    for (a, b, sim, expected) in cases {
        let c = verdict(a, b, sim);
        assert_eq!(c.verdict, expected, "{c:?}");
    }
}

#[test]
fn the_residual_matters_only_where_needs_residual_says() {
    let m = shipped();
    let pairs = [
        ("Prefer tabs over spaces.", "Prefer spaces over tabs.", 0.99),
        ("Close the file handle in a finally block.", "Close the file handle in a finally block, please.", 0.99),
        (
            "Bound LIKE patterns still need wildcard escaping.",
            "Parameterizing a LIKE search does not neutralize % and _.",
            0.86,
        ),
        ("Map.get returns null for a missing key.", "Dereferencing map.get(key) throws when the key is absent.", 0.93),
        ("Close the file.", "Bind SQL parameters.", 0.5),
    ];
    for (a, b, sim) in pairs {
        let low = compare(a, b, sim, 0.0, &m).verdict;
        let high = compare(a, b, sim, 1.0, &m).verdict;
        if !needs_residual(a, b, sim, &m) {
            assert_eq!(low, high, "{a} / {b}");
        }
    }
    assert!(m.decisive() >= m.neighbour);
}
