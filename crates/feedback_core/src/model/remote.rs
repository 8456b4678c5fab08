//! Models run by another process (the extension's shared inference worker): requests and replies as bytes, the
//! client side as a [`ModelHost`] over any [`Transport`], and the server side, which answers many requests with
//! shared model runs. Nothing here knows how the bytes travel (the extension uses dynamic shared memory).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::encoder::TextRole;
use super::error::{ModelError, Result};
use super::host::{in_chunks, HostConfig, HostStats, ModelHost};

/// What a request asks the model host to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Job {
    Embed { texts: Vec<String>, query: bool },
    Rerank { pairs: Vec<(String, String)> },
    CountTokens { text: String },
}

/// One request: the model (a folder name, or a pinned key `name@sha256` that the loaded weights must match, so a
/// caller never gets vectors of a model it did not ask for), the model directory the caller's settings name, and
/// the job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub model: String,
    pub model_dir: PathBuf,
    /// The caller's run limits (`pg_feedback.embed_batch_size`, `pg_feedback.max_batch_tokens`): a request answered
    /// alone is split into exactly the runs the caller's own host would make.
    pub max_rows: usize,
    pub max_tokens: usize,
    /// The caller's `pg_feedback.rerank_max_tokens` (0: the model's limit).
    #[serde(default)]
    pub max_pair_tokens: usize,
    pub job: Job,
}

/// A successful reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Vectors(Vec<Vec<f32>>),
    Scores(Vec<f32>),
    Count(usize),
}

/// Room for an error reply: a longer one is cut to a generic error.
pub const ERROR_CAPACITY: usize = 16 * 1024;

const TAG_VECTORS: u8 = 0;
const TAG_SCORES: u8 = 1;
const TAG_COUNT: u8 = 2;
const TAG_ERROR: u8 = 255;

fn protocol(what: &str) -> ModelError {
    ModelError::Worker { reason: format!("sent a reply this backend cannot read ({what})") }
}

impl Request {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a request always serializes")
    }

    pub fn decode(bytes: &[u8]) -> Result<Request> {
        serde_json::from_slice(bytes)
            .map_err(|e| ModelError::Worker { reason: format!("received a request it cannot read: {e}") })
    }

    /// Bytes any reply to this request fits in, for vectors `dims` wide: the caller reserves them.
    pub fn reply_capacity(&self, dims: usize) -> usize {
        let body = match &self.job {
            Job::Embed { texts, .. } => 8 + texts.len() * dims * 4,
            Job::Rerank { pairs } => 4 + pairs.len() * 4,
            Job::CountTokens { .. } => 8,
        };
        1 + body.max(ERROR_CAPACITY)
    }

    fn items(&self) -> usize {
        match &self.job {
            Job::Embed { texts, .. } => texts.len(),
            Job::Rerank { pairs } => pairs.len(),
            Job::CountTokens { .. } => 1,
        }
    }
}

/// Writes `reply` into `buf` and returns the bytes used. A reply that does not fit becomes an error reply.
pub fn encode_reply(reply: &Result<Output>, buf: &mut [u8]) -> usize {
    let mut out = Vec::new();
    match reply {
        Ok(Output::Vectors(vectors)) => {
            out.push(TAG_VECTORS);
            out.extend((vectors.len() as u32).to_le_bytes());
            out.extend((vectors.first().map_or(0, Vec::len) as u32).to_le_bytes());
            vectors.iter().flatten().for_each(|x| out.extend(x.to_le_bytes()));
        }
        Ok(Output::Scores(scores)) => {
            out.push(TAG_SCORES);
            out.extend((scores.len() as u32).to_le_bytes());
            scores.iter().for_each(|x| out.extend(x.to_le_bytes()));
        }
        Ok(Output::Count(n)) => {
            out.push(TAG_COUNT);
            out.extend((*n as u64).to_le_bytes());
        }
        Err(e) => {
            out.push(TAG_ERROR);
            out.extend(serde_json::to_vec(e).expect("a model error always serializes"));
        }
    }
    if out.len() > buf.len() {
        let too_big =
            Err(ModelError::Worker { reason: format!("had a reply of {} bytes, over the room for it", out.len()) });
        return if buf.len() >= 256 { encode_reply(&too_big, buf) } else { 0 };
    }
    buf[..out.len()].copy_from_slice(&out);
    out.len()
}

pub fn decode_reply(buf: &[u8]) -> Result<Output> {
    let (&tag, body) = buf.split_first().ok_or_else(|| protocol("empty"))?;
    let u32_at = |i: usize| -> Result<usize> {
        let b = body.get(i..i + 4).ok_or_else(|| protocol("short"))?;
        Ok(u32::from_le_bytes(b.try_into().unwrap()) as usize)
    };
    let floats = |from: usize, n: usize| -> Result<Vec<f32>> {
        let b = body.get(from..from + n * 4).ok_or_else(|| protocol("short"))?;
        Ok(b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect())
    };
    match tag {
        TAG_VECTORS => {
            let (n, dims) = (u32_at(0)?, u32_at(4)?);
            let flat = floats(8, n * dims)?;
            Ok(Output::Vectors(if dims == 0 {
                vec![Vec::new(); n]
            } else {
                flat.chunks(dims).map(<[f32]>::to_vec).collect()
            }))
        }
        TAG_SCORES => Ok(Output::Scores(floats(4, u32_at(0)?)?)),
        TAG_COUNT => {
            let b = body.get(0..8).ok_or_else(|| protocol("short"))?;
            Ok(Output::Count(u64::from_le_bytes(b.try_into().unwrap()) as usize))
        }
        TAG_ERROR => Err(serde_json::from_slice(body).map_err(|e| protocol(&e.to_string()))?),
        _ => Err(protocol("unknown tag")),
    }
}

/// How a [`RemoteHost`] reaches the process that runs the models.
pub trait Transport {
    /// Sends `request` and waits for its reply, calling `between` while it waits (the extension checks for query
    /// cancellation there; a cancellation unwinds out of this call and the reply is dropped).
    fn call(&mut self, request: &Request, between: &mut dyn FnMut()) -> Result<Output>;
}

/// A [`ModelHost`] whose models run elsewhere. Large calls are sent as requests of at most `cfg.batch_size`
/// texts (or pairs), one at a time, so one bulk load cannot hold the shared worker for long: other sessions'
/// requests join the batches in between. Stats count requests as runs.
pub struct RemoteHost<T> {
    transport: T,
    stats: HostStats,
}

impl<T: Transport> RemoteHost<T> {
    pub const fn new(transport: T) -> Self {
        RemoteHost { transport, stats: HostStats::ZERO }
    }

    fn call(&mut self, cfg: &HostConfig, model: &str, job: Job, between: &mut dyn FnMut()) -> Result<Output> {
        let request = Request {
            model: model.to_string(),
            model_dir: cfg.model_dir.clone(),
            max_rows: cfg.batch_size,
            max_tokens: cfg.max_batch_tokens,
            max_pair_tokens: cfg.max_pair_tokens,
            job,
        };
        let expected = request.items();
        let output = self.transport.call(&request, between)?;
        let got = match &output {
            Output::Vectors(v) => v.len(),
            Output::Scores(s) => s.len(),
            Output::Count(_) => 1,
        };
        if got != expected {
            return Err(protocol(&format!("{got} results for {expected} inputs")));
        }
        Ok(output)
    }
}

impl<T: Transport> ModelHost for RemoteHost<T> {
    fn embed(
        &mut self,
        cfg: &HostConfig,
        model: &str,
        texts: &[&str],
        role: TextRole,
        between: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<f32>>> {
        in_chunks(texts, cfg, |chunk| {
            let job =
                Job::Embed { texts: chunk.iter().map(|t| t.to_string()).collect(), query: role == TextRole::Query };
            let Output::Vectors(v) = self.call(cfg, model, job, between)? else {
                return Err(protocol("not vectors"));
            };
            self.stats.embed_runs += 1;
            self.stats.texts_embedded += chunk.len() as u64;
            Ok(v)
        })
    }

    fn rerank_pairs(
        &mut self,
        cfg: &HostConfig,
        model: &str,
        pairs: &[(&str, &str)],
        between: &mut dyn FnMut(),
    ) -> Result<Vec<f32>> {
        in_chunks(pairs, cfg, |chunk| {
            let job = Job::Rerank { pairs: chunk.iter().map(|(q, p)| (q.to_string(), p.to_string())).collect() };
            let Output::Scores(s) = self.call(cfg, model, job, between)? else {
                return Err(protocol("not scores"));
            };
            self.stats.rerank_runs += 1;
            self.stats.pairs_scored += chunk.len() as u64;
            Ok(s)
        })
    }

    fn count_tokens(&mut self, cfg: &HostConfig, model: &str, text: &str) -> Result<usize> {
        match self.call(cfg, model, Job::CountTokens { text: text.to_string() }, &mut || ())? {
            Output::Count(n) => Ok(n),
            _ => Err(protocol("not a count")),
        }
    }

    fn stats(&self) -> HostStats {
        self.stats
    }
}

/// Which requests can share model runs: same job kind (and text role), same model, same model directory, same
/// pair length limit.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Group {
    /// Latency-sensitive work first: query embeddings, then reranking, token counts, and bulk embeddings last.
    order: u8,
    model: String,
    model_dir: PathBuf,
    max_pair_tokens: usize,
}

fn group_of(r: &Request) -> Group {
    let order = match &r.job {
        Job::Embed { query: true, .. } => 0,
        Job::Rerank { .. } => 1,
        Job::CountTokens { .. } => 2,
        Job::Embed { query: false, .. } => 3,
    };
    Group { order, model: r.model.clone(), model_dir: r.model_dir.clone(), max_pair_tokens: r.max_pair_tokens }
}

/// Answers `requests` in as few model runs as the run limits allow: requests for the same model and job kind are
/// merged into one call (the encoder groups their texts by length into runs, within `cfg`'s limits), then split
/// back. A request alone in its group runs within its own limits, as its caller's host would have run it. If a
/// merged call fails, each of its requests is retried alone, so an error fails only the requests it concerns.
/// Replies come back in request order.
pub fn serve(
    host: &mut dyn ModelHost,
    cfg: &HostConfig,
    requests: &[&Request],
    between: &mut dyn FnMut(),
) -> Vec<Result<Output>> {
    let mut replies: Vec<Option<Result<Output>>> = vec![None; requests.len()];
    let mut order: Vec<usize> = (0..requests.len()).collect();
    order.sort_by_key(|&i| group_of(requests[i]));
    for members in order.chunk_by(|&a, &b| group_of(requests[a]) == group_of(requests[b])) {
        let merged = run_merged(host, cfg, requests, members, between);
        match merged {
            Ok(outputs) => {
                for (&i, output) in members.iter().zip(outputs) {
                    replies[i] = Some(Ok(output));
                }
            }
            Err(e) if members.len() == 1 => replies[members[0]] = Some(Err(e)),
            Err(_) => {
                for &i in members {
                    let alone = run_merged(host, cfg, requests, &[i], between);
                    replies[i] = Some(alone.map(|mut v| v.remove(0)));
                }
            }
        }
    }
    replies.into_iter().map(|r| r.expect("every request is answered")).collect()
}

/// One model call for the requests `members` (all of one group); their outputs in `members` order.
fn run_merged(
    host: &mut dyn ModelHost,
    cfg: &HostConfig,
    requests: &[&Request],
    members: &[usize],
    between: &mut dyn FnMut(),
) -> Result<Vec<Output>> {
    let first = requests[members[0]];
    let cfg = match members.len() {
        1 => HostConfig {
            model_dir: first.model_dir.clone(),
            batch_size: first.max_rows,
            max_batch_tokens: first.max_tokens,
            max_pair_tokens: first.max_pair_tokens,
            ..cfg.clone()
        },
        _ => HostConfig { model_dir: first.model_dir.clone(), max_pair_tokens: first.max_pair_tokens, ..cfg.clone() },
    };
    let model = first.model.as_str();
    let sizes: Vec<usize> = members.iter().map(|&i| requests[i].items()).collect();
    match &first.job {
        Job::Embed { query, .. } => {
            let texts: Vec<&str> = members
                .iter()
                .flat_map(|&i| match &requests[i].job {
                    Job::Embed { texts, .. } => texts.iter().map(String::as_str).collect::<Vec<_>>(),
                    _ => Vec::new(),
                })
                .collect();
            let role = if *query { TextRole::Query } else { TextRole::Document };
            let vectors = host.embed(&cfg, model, &texts, role, between)?;
            Ok(split(vectors, &sizes).into_iter().map(Output::Vectors).collect())
        }
        Job::Rerank { .. } => {
            let pairs: Vec<(&str, &str)> = members
                .iter()
                .flat_map(|&i| match &requests[i].job {
                    Job::Rerank { pairs } => pairs.iter().map(|(q, p)| (q.as_str(), p.as_str())).collect::<Vec<_>>(),
                    _ => Vec::new(),
                })
                .collect();
            let scores = host.rerank_pairs(&cfg, model, &pairs, between)?;
            Ok(split(scores, &sizes).into_iter().map(Output::Scores).collect())
        }
        Job::CountTokens { .. } => members
            .iter()
            .map(|&i| match &requests[i].job {
                Job::CountTokens { text } => host.count_tokens(&cfg, model, text).map(Output::Count),
                _ => unreachable!("a group holds one job kind"),
            })
            .collect(),
    }
}

/// `flat` cut into consecutive pieces of `sizes`.
fn split<T>(flat: Vec<T>, sizes: &[usize]) -> Vec<Vec<T>> {
    let mut flat = flat.into_iter();
    sizes.iter().map(|&n| flat.by_ref().take(n).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_round_trip() {
        let cases = [
            Ok(Output::Vectors(vec![vec![0.25, -1.5, f32::MIN_POSITIVE], vec![3.0, 0.0, -0.0]])),
            Ok(Output::Vectors(Vec::new())),
            Ok(Output::Scores(vec![-9.4, 0.1])),
            Ok(Output::Count(123_456)),
            Err(ModelError::Changed { pinned: "a@1".into(), installed: "a@2".into() }),
            Err(ModelError::WrongKind {
                name: "x".into(),
                expected: "embedding".into(),
                actual: "cross-encoder".into(),
            }),
        ];
        for reply in cases {
            let mut buf = vec![0u8; 64 * 1024];
            let n = encode_reply(&reply, &mut buf);
            assert_eq!(decode_reply(&buf[..n]), reply);
        }
    }

    #[test]
    fn a_reply_over_its_room_becomes_an_error() {
        let mut buf = vec![0u8; 1024];
        let n = encode_reply(&Ok(Output::Scores(vec![1.0; 1000])), &mut buf);
        assert!(matches!(decode_reply(&buf[..n]), Err(ModelError::Worker { .. })));
        assert!(decode_reply(&[]).is_err());
        assert!(decode_reply(&[TAG_VECTORS, 9]).is_err());
    }

    #[test]
    fn requests_round_trip_and_reserve_room() {
        let r = Request {
            model: "bge-small-en-v1.5@00".into(),
            model_dir: "/m".into(),
            max_rows: 64,
            max_tokens: 1024,
            max_pair_tokens: 0,
            job: Job::Embed { texts: vec!["a\u{0}b".into(), "ü".into()], query: false },
        };
        assert_eq!(Request::decode(&r.encode()).unwrap(), r);
        assert_eq!(r.reply_capacity(384), 1 + ERROR_CAPACITY);
        let big = Request { job: Job::Embed { texts: vec![String::new(); 64], query: true }, ..r.clone() };
        assert_eq!(big.reply_capacity(384), 1 + 8 + 64 * 384 * 4);
        assert!(matches!(Request::decode(b"{"), Err(ModelError::Worker { .. })));
    }

    #[test]
    fn groups_put_queries_first_and_bulk_last() {
        let r = |job| Request {
            model: "m".into(),
            model_dir: "/m".into(),
            max_rows: 1,
            max_tokens: 1,
            max_pair_tokens: 0,
            job,
        };
        let bulk = group_of(&r(Job::Embed { texts: vec![], query: false }));
        let query = group_of(&r(Job::Embed { texts: vec![], query: true }));
        let rerank = group_of(&r(Job::Rerank { pairs: vec![] }));
        assert!(query < rerank && rerank < bulk);
    }
}
