//! Cancelling a model call with real models, as the shared worker's runners do: a flag set while the call runs
//! stops it at the next tokenized input or model run, with `ModelError::Cancelled`, and leaves the host usable
//! (the next call gives the same vectors as a host that was never interrupted).

mod common;

use std::sync::atomic::AtomicU32;

use feedback_core::model::cancel::{cancellable, CancelFlag};
use feedback_core::model::remote::{serve, Job};
use feedback_core::model::{LocalHost, ModelError, ModelHost, TextRole};

const EMBEDDER: &str = "bge-small-en-v1.5";

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("Note {i}: {}", "Always pass a timeout to requests.get. ".repeat(40))).collect()
}

#[test]
fn a_flag_set_mid_call_stops_it_between_inputs_and_runs() {
    let cfg = common::config();
    let texts = texts(12);
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut host = LocalHost::new();
    let reference = host.embed(&cfg, EMBEDDER, &texts, TextRole::Document, &mut || ()).unwrap();
    let runs_before = runs(&mut host);

    let word = AtomicU32::new(0);
    let flag = CancelFlag::new(&word);
    let mut checks = 0;
    let result = cancellable(|| {
        host.embed(&cfg, EMBEDDER, &texts, TextRole::Document, &mut || {
            checks += 1;
            if checks == 3 {
                flag.set(); // the backend gave up during the second run
            }
            flag.check();
        })
    });
    assert_eq!(result, Err(ModelError::Cancelled));
    assert_eq!(checks, 3, "stopped at the first check after the flag was set");
    // Checks come before every run (three chunks of four short texts: one run each): two runs, then the stop.
    assert_eq!(runs(&mut host) - runs_before, 2, "no model ran after the flag was set");

    // The host is still usable and gives what it gave before.
    let again = host.embed(&cfg, EMBEDDER, &texts, TextRole::Document, &mut || ()).unwrap();
    assert_eq!(again, reference);
}

#[test]
fn serve_stops_a_cancelled_request_between_model_runs() {
    // batch_size 4, so twelve texts are three chunks and at least three runs: cancelled after the first run.
    let cfg = common::config();
    let request = common::request(&cfg, EMBEDDER, Job::Embed { texts: texts(12), query: false });
    let mut host = LocalHost::new();
    host.embed(&cfg, EMBEDDER, &["load"], TextRole::Document, &mut || ()).unwrap();
    let before = runs(&mut host);
    let word = AtomicU32::new(0);
    let flag = CancelFlag::new(&word);
    let result = cancellable(|| Ok(serve(&mut host, &cfg, &[&request], &mut || flag.check())));
    // Not cancelled: the flag was never set.
    assert!(result.unwrap()[0].is_ok());
    let full = runs(&mut host) - before;
    assert!(full >= 3, "{full} runs");

    let before = runs(&mut host);
    let mut seen = 0;
    let result = cancellable(|| {
        let mut between = || {
            seen += 1;
            // Checks come before every run (one per chunk of four short texts): set before the second.
            if seen == 2 {
                flag.set();
            }
            flag.check();
        };
        Ok(serve(&mut host, &cfg, &[&request], &mut between))
    });
    assert_eq!(result.map(|_| ()), Err(ModelError::Cancelled));
    let cancelled = runs(&mut host) - before;
    assert!(cancelled < full, "the cancelled request made {cancelled} of {full} runs");
}

/// Model runs the embedder's session has made (cancelled calls included: the host's stats skip those).
fn runs(host: &mut LocalHost) -> u64 {
    host.embedder(&common::config(), EMBEDDER).unwrap().runs()
}
